// The hand-written Qwen splitter: exact pieces on hand-picked inputs, and identical pieces to
// PCRE2 running the pattern from tokenizer.json on random strings of the characters where
// the regex's alternatives compete.
#include <boost/test/unit_test.hpp>

#include <random>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/pretokenizer.hpp"

using namespace troupe::tok;

namespace {

std::vector<std::string> split_fast(std::string_view s) {
  std::vector<std::string> out;
  qwen_split(s, [&](size_t off, size_t len) { out.emplace_back(s.substr(off, len)); });
  return out;
}

std::vector<std::string> split_regex(const regex_splitter& re, std::string_view s) {
  std::vector<std::pair<size_t, size_t>> pieces;
  re.split(s, pieces);
  std::vector<std::string> out;
  for (auto [o, l] : pieces) out.emplace_back(s.substr(o, l));
  return out;
}

using pieces = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(pretokenizer)

BOOST_AUTO_TEST_CASE(hand_picked_splits) {
  BOOST_TEST(split_fast("Hello world  123 \xE4\xBD\xA0\xE5\xA5\xBD!") ==
             (pieces{"Hello", " world", " ", " ", "1", "2", "3", " \xE4\xBD\xA0\xE5\xA5\xBD", "!"}));
  BOOST_TEST(split_fast("I'LL don't\n\n  x\tEnd  ") ==
             (pieces{"I", "'LL", " don", "'t", "\n\n", " ", " x", "\tEnd", "  "}));
  BOOST_TEST(split_fast("THEY'RE a'sb ''") == (pieces{"THEY", "'RE", " a", "'s", "b", " ''"}));
  BOOST_TEST(split_fast("it'\xC5\xBFt") == (pieces{"it", "'\xC5\xBF", "t"}));  // U+017F folds to s
  BOOST_TEST(split_fast("x\r\n\r\ny") == (pieces{"x", "\r\n\r\n", "y"}));
  BOOST_TEST(split_fast("!!!\n\nabc") == (pieces{"!!!\n\n", "abc"}));
  BOOST_TEST(split_fast("a  \n b") == (pieces{"a", "  \n", " b"}));
  BOOST_TEST(split_fast(" ?! x") == (pieces{" ?!", " x"}));
  BOOST_TEST(split_fast("abc   ") == (pieces{"abc", "   "}));
  BOOST_TEST(split_fast("\xC2\xA0word") == (pieces{"\xC2\xA0word"}));               // NBSP prefixes a word
  BOOST_TEST(split_fast("12.5") == (pieces{"1", "2", ".", "5"}));
  BOOST_TEST(split_fast("\xE0\xA5\xA7\xE0\xA5\xA8") == (pieces{"\xE0\xA5\xA7", "\xE0\xA5\xA8"}));  // १२
  BOOST_TEST(split_fast("\n") == (pieces{"\n"}));
  BOOST_TEST(split_fast("").empty());
}

BOOST_AUTO_TEST_CASE(qwen_pattern_is_recognised_from_tokenizer_json_text) {
  // The escaped JSON text of tokenizer.json's pattern, decoded, must equal qwen_pattern
  // exactly, or the fast path would silently never be taken (the reader compares them).
  BOOST_TEST(qwen_pattern.find(R"(\s+(?!\S))") != std::string_view::npos);
  BOOST_TEST(qwen_pattern.substr(0, 8) == "(?i:'s|'");
}

BOOST_AUTO_TEST_CASE(random_strings_split_exactly_like_pcre2) {
  regex_splitter re{std::string(qwen_pattern)};
  // U+0085 and U+FEFF are left out: regex engines disagree on whether they are white space.
  const char* pool[] = {"a", "Z", "s", "S", "t", "re", "VE", "m", "ll", "D", "'", "\xC5\xBF", "\xC3\xA9",
                        "\xE4\xB8\x80", "\xEA\xB0\x80", "0", "9", "\xEF\xBC\x91", "\xE0\xA5\xA7", "\xC2\xB2", " ",
                        " ", " ", "\t", "\n", "\r", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "!", ".", "?",
                        "-", "\"", "(", "\xCC\x81", "\xF0\x9F\x98\x80", "\xE2\x80\x8B", "\x01", "_"};
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1), len(0, 30);
  int failures = 0;
  for (int iter = 0; iter < 30000 && failures < 5; ++iter) {
    std::string s;
    for (size_t n = len(rng); n > 0; --n) s += pool[pick(rng)];
    if (split_fast(s) != split_regex(re, s)) {
      ++failures;
      BOOST_ERROR("pieces differ from PCRE2 for input of " << s.size() << " bytes");
    }
  }
}

BOOST_AUTO_TEST_CASE(regex_splitter_keeps_unmatched_text_as_pieces) {
  regex_splitter re{"[0-9]+"};  // Isolated: matches and the gaps between them are pieces
  BOOST_TEST(split_regex(re, "ab12cd345") == (pieces{"ab", "12", "cd", "345"}));
  BOOST_CHECK_THROW(regex_splitter{"(unclosed"}, troupe::error);
}

BOOST_AUTO_TEST_SUITE_END()
