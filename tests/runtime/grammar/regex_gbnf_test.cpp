// regex_to_gbnf against std::regex (ECMAScript): for each pattern, every string up to length 4
// over an alphabet chosen for it, plus a few longer ones, is matched by both; they must agree.
#define BOOST_TEST_MODULE grammar_convert
#include <boost/test/unit_test.hpp>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/grammar/regex_gbnf.hpp"
#include "runtime/grammar/token_table.hpp"
#include "tests/runtime/grammar/accepts.hpp"

namespace g = troupe::grammar;

using troupe::grammar::test::accepts;

namespace {

std::shared_ptr<const g::grammar> compile(const std::string& expr) {
  return std::make_shared<const g::grammar>(g::parse_gbnf("root ::= " + expr + "\n"));
}

std::vector<std::string> all_strings(std::string_view alphabet, size_t max_len) {
  std::vector<std::string> out{""};
  for (size_t start = 0, len = 1; len <= max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = start; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    start = end;
  }
  return out;
}

struct regex_case {
  std::string pattern;
  std::string alphabet;
  std::vector<std::string> extra;
};

const std::vector<regex_case> kCases = {
    {"abc", "abc", {}},
    {"a|bc|", "abc", {}},
    {"a*", "ab", {"aaaaaaaa"}},
    {"(a|b)*c", "abc", {"ababababc"}},
    {"a+b?", "ab", {}},
    {"a{2}", "ab", {}},
    {"a{1,3}b{2,}", "ab", {"aaabbbbbb", "aaaabb"}},
    {"(ab){0,2}", "ab", {"ababab"}},
    {"(a*)*", "ab", {}},
    {"(a?)+b", "ab", {}},
    {"(a*b*)*", "abc", {}},
    {"(a|)*b", "ab", {}},
    {"((a?)(b?)){2,3}c", "abc", {"ababac", "abababc"}},
    {"(a?b?){0,2}", "ab", {"ababa"}},
    {"[a-c]+", "abcd", {}},
    {"[^a]b", "abc\n", {}},
    {"[^ab]*", "abc", {}},
    {"\\d+", "a1 9", {}},
    {"\\D\\w\\W", "a1_ -", {}},
    {"\\s?x", " \tx\n", {}},
    {".", "a\n\r", {}},
    {".*b", "ab\n", {}},
    {"\\.\\*\\\\", "\\.*a", {}},
    {"[\\]\\-x]+", "]-x\\", {}},
    {"[-a]", "-ab", {}},
    {"^ab$", "ab", {}},
    {"^a|b$", "ab", {}},
    {"(?:ab|cd)+", "abcd", {"abcdab"}},
    {"a+?b*?", "ab", {}},
    {"\\x41\\u0042", "ABa", {}},
    {"[\\d_]{2,3}", "1_a", {}},
    {"x{0}y", "xy", {}},
    {"(a|b)(c|)", "abc", {}},
    {"\"q\"", "\"q", {}},
    {"\\n\\t", "\n\tn", {}},
    {"(a{1,2}){2}", "a", {"aaaaa"}},
    {"[\\s\\S]", "a\n", {}},
    {"[^\\d\\s]+", "1 a-", {}},
    {"\\/\\-\\^\\$", "/-^$", {}},
    {"a{0,}b{1,}", "ab", {}},
    {"(a|ab)(c|bcd)", "abcd", {}},
};

}  // namespace

BOOST_AUTO_TEST_CASE(regex_matches_like_std_regex) {
  size_t compared = 0;
  for (const regex_case& c : kCases) {
    BOOST_TEST_CONTEXT("pattern " << c.pattern) {
      const std::string expr = g::regex_to_gbnf(c.pattern);
      std::shared_ptr<const g::grammar> gr;
      BOOST_REQUIRE_NO_THROW(gr = compile(expr));
      const std::regex re(c.pattern, std::regex::ECMAScript);
      std::vector<std::string> strings = all_strings(c.alphabet, 4);
      strings.insert(strings.end(), c.extra.begin(), c.extra.end());
      size_t matched = 0, mismatches = 0;
      for (const std::string& s : strings) {
        const bool want = std::regex_match(s, re);
        matched += want;
        if (accepts(gr, s) != want && ++mismatches <= 5)
          BOOST_ERROR("'" << s << "': std::regex says " << want << ", the grammar (" << expr << ") differs");
        ++compared;
      }
      BOOST_TEST(matched > 0);  // the alphabet exercises the pattern
      BOOST_TEST(matched < strings.size());
    }
  }
  BOOST_TEST_MESSAGE("compared " << compared << " strings");
}

BOOST_AUTO_TEST_CASE(regex_non_ascii_is_matched_per_code_point) {
  // std::regex works on bytes, so these are checked by hand: one `.` is one code point.
  auto gr = compile(g::regex_to_gbnf("^.[é-ë]\\u4E2D{2}$"));
  BOOST_TEST(accepts(gr, "xé中中"));
  BOOST_TEST(accepts(gr, "🎉ë中中"));
  BOOST_TEST(!accepts(gr, "xe中中"));
  BOOST_TEST(!accepts(gr, "xé中"));
  BOOST_TEST(!accepts(gr, "\xC3x\xA9中中"));
  // A named group is a plain group.
  auto named = compile(g::regex_to_gbnf("(?<year>\\d{2})-(?P<m>\\d)"));
  BOOST_TEST(accepts(named, "24-5"));
  BOOST_TEST(!accepts(named, "245"));
}

BOOST_AUTO_TEST_CASE(regex_expression_fits_inside_a_sequence) {
  auto gr = compile("\"<\" " + g::regex_to_gbnf("a|bc") + " \">\"");
  BOOST_TEST(accepts(gr, "<a>"));
  BOOST_TEST(accepts(gr, "<bc>"));
  BOOST_TEST(!accepts(gr, "<a"));
  BOOST_TEST(!accepts(gr, "a>"));
  BOOST_TEST(g::regex_to_gbnf("") == "\"\"");
}

BOOST_AUTO_TEST_CASE(regex_json_string_mode_writes_escapes) {
  // Between JSON quotes: `"` is \", a newline \n, other controls \u00XX (either hex case).
  auto gr = compile(g::regex_to_gbnf_json_string("a\"\\n[\\x01\\\\]"));
  BOOST_TEST(accepts(gr, "a\\\"\\n\\u0001"));
  BOOST_TEST(accepts(gr, "a\\\"\\n\\\\"));
  BOOST_TEST(!accepts(gr, "a\"\n\x01"));
  auto dot = compile(g::regex_to_gbnf_json_string(".+"));
  BOOST_TEST(accepts(dot, "x\\t\\u001F\\u001fé"));
  BOOST_TEST(!accepts(dot, "\\n"));   // `.` does not match a newline
  BOOST_TEST(!accepts(dot, "\""));    // a raw quote would end the string
  BOOST_TEST(!accepts(dot, "\\"));
}

BOOST_AUTO_TEST_CASE(regex_refuses_unsupported_syntax_with_offset) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"ab(cd", "offset 2"},     {"a)", "offset 1"},          {"(a)\\1", "back-reference"},
      {"(?=a)b", "lookahead"},   {"(?<=a)b", "lookbehind"},  {"(?!a)", "lookahead"},
      {"a{1001}", "limit"},      {"a{3,2}", "m > n"},         {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"}, {"a\\b", "word boundary"}, {"a^b", "'^'"},
      {"a$b", "'$'"},            {"[ab", "unterminated"},     {"[b-a]", "out of order"},
      {"(?i)a", "group"},        {"\\p{L}", "property"},      {"[]", "matches nothing"},
      {"\\k<n>", "back-reference"}, {"\\q", "unknown escape"}, {"(a", "offset 0"},
      {"\\uD800", "surrogate"},  {"a\\", "end of the pattern"},
  };
  for (const auto& [pattern, needle] : bad) {
    BOOST_TEST_CONTEXT("pattern " << pattern) {
      try {
        const std::string out = g::regex_to_gbnf(pattern);
        BOOST_ERROR("accepted, gave " << out);
      } catch (const troupe::error& e) {
        const std::string msg = e.what();
        BOOST_TEST((e.code() == troupe::errc::invalid_argument));
        BOOST_TEST(msg.starts_with("regex: "), msg);
        BOOST_TEST(msg.find("at offset") != std::string::npos, msg);
        BOOST_TEST(msg.find(needle) != std::string::npos, msg);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(regex_never_repeats_what_matches_empty) {
  // The GBNF parser refuses such repetitions; every one of these must still compile.
  for (const char* p : {"(a*)*", "(a?)*", "(a*)+", "(a?){3}", "(|a)+", "((a*)(b?))*", "(a{0,2}){2,5}", "(()|a)*", "()*"})
    BOOST_CHECK_NO_THROW(compile(g::regex_to_gbnf(p)));
  BOOST_TEST(g::regex_to_gbnf("(a*)*") == "\"a\"*");
}
