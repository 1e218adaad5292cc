// Streamed output text with the real Qwen3 tokenizer: deltas are whole UTF-8 characters, their
// concatenation is the decoded text, and stop strings cut it exactly before the first match even
// when the match spans several tokens.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/serve/output_text.hpp"
#include "runtime/wire/utf8.hpp"

using namespace troupe;
using troupe::serve::output_text;

namespace {
const tokenizer& qwen3() {
  static tokenizer t(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  return t;
}

struct streamed {
  std::string text;
  bool stopped = false;
  size_t tokens_used = 0;
};

streamed stream(const std::string& text, std::vector<std::string> stop, int32_t min_tokens = 0,
                bool include_stop = false) {
  output_text o(&qwen3(), std::move(stop), min_tokens, include_stop);
  streamed s;
  for (int32_t id : qwen3().encode(text)) {
    ++s.tokens_used;
    auto d = o.push(id);
    BOOST_TEST(wire::is_valid_utf8(d.text));
    s.text += d.text;
    if (d.stopped) {
      s.stopped = true;
      return s;
    }
  }
  s.text += o.finish();
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(output_text_suite)

BOOST_AUTO_TEST_CASE(without_stop_strings_the_text_is_the_decoding) {
  for (std::string t : {"Hello world!", "你好，世界 🌍 ok", "a\n\n  b\tc", "emoji 👩‍👩‍👧 family"}) {
    auto s = stream(t, {});
    BOOST_TEST(s.text == t);
    BOOST_TEST(!s.stopped);
  }
}

// vLLM's min_tokens: stop strings are looked for only in the text of the min_tokens-th token and
// later ones.
BOOST_AUTO_TEST_CASE(min_tokens_defers_stop_strings) {
  const std::string text = "x. x. y. x. z";
  const auto ids = qwen3().encode(text);
  BOOST_REQUIRE(ids.size() >= 9u);
  // Without min_tokens the first "x." stops it at once.
  BOOST_TEST(stream(text, {"x."}).text == "");
  // Which token completes each match decides: find the text after k tokens.
  for (int32_t min_tokens = 1; min_tokens <= static_cast<int32_t>(ids.size()); ++min_tokens) {
    const auto s = stream(text, {"x."}, min_tokens);
    // Reference: decode the first min_tokens - 1 tokens (released unchecked), then the first
    // "x." that starts at or after that text's end ... or whose match the later tokens complete.
    const std::string before = qwen3().decode(std::span(ids).first(static_cast<size_t>(min_tokens - 1)));
    size_t at = text.find("x.", before.size());
    // A match spanning the boundary (its "x" released early) does not count.
    const std::string expected = at == std::string::npos ? text : text.substr(0, at);
    BOOST_TEST(s.text == expected, "min_tokens " << min_tokens);
    BOOST_TEST(s.stopped == (at != std::string::npos), "min_tokens " << min_tokens);
  }
}

BOOST_AUTO_TEST_CASE(stop_strings_cut_before_the_first_match) {
  struct c {
    std::string text;
    std::vector<std::string> stop;
  };
  for (const auto& k : std::vector<c>{
           {"Hello world. END of it", {"END"}},
           {"one two three four", {"three", "two"}},   // earliest match wins
           {"abcdefghij", {"def"}},                    // inside a token or across tokens
           {"你好世界再见", {"世界"}},                 // multi-byte
           {"no match here", {"zzz"}},
           {"line one\n\nline two", {"\n\n"}},
       }) {
    BOOST_TEST_CONTEXT(k.text) {
      auto s = stream(k.text, k.stop);
      size_t first = std::string::npos, len = 0;
      for (const auto& st : k.stop)
        if (k.text.find(st) < first) {
          first = k.text.find(st);
          len = st.size();
        }
      BOOST_TEST(s.text == k.text.substr(0, first));
      BOOST_TEST(s.stopped == (first != std::string::npos));
      // vLLM's include_stop_str_in_output: the same cut, after the matched string.
      auto with = stream(k.text, k.stop, 0, true);
      BOOST_TEST(with.text == k.text.substr(0, first == std::string::npos ? first : first + len));
      BOOST_TEST(with.stopped == s.stopped);
      BOOST_TEST(with.tokens_used == s.tokens_used);
    }
  }
}

// vLLM's skip_special_tokens: special tokens (<|im_end|>, <|endoftext|>) have no text by
// default; false keeps theirs, where a stop string can match it. <think> is not special in
// Qwen3's tokenizer: its text is there either way.
BOOST_AUTO_TEST_CASE(special_tokens_have_text_only_when_asked) {
  const auto ids = qwen3().encode_with_special_tokens("Hi<|im_end|>\n<|im_start|>user<think>");
  BOOST_TEST_REQUIRE(qwen3().is_special(*qwen3().token_to_id("<|im_end|>")));
  const auto run = [&](output_text o) {
    std::string text;
    for (int32_t id : ids) text += o.push(id).text;
    return text + o.finish();
  };
  BOOST_TEST(run(output_text(&qwen3(), {})) == "Hi\nuser<think>");
  BOOST_TEST(run(output_text(&qwen3(), {}, 0, false, false)) == "Hi<|im_end|>\n<|im_start|>user<think>");
  auto o = output_text(&qwen3(), {"<|im_start|>"}, 0, false, false);
  std::string text;
  for (int32_t id : ids) {
    auto d = o.push(id);
    text += d.text;
    if (d.stopped) break;
  }
  BOOST_TEST(text == "Hi<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(text_that_may_start_a_stop_string_is_held_back_then_released) {
  output_text o(&qwen3(), {"Hello world"});
  auto ids = qwen3().encode("Hello there");
  std::string got;
  auto first = o.push(ids[0]);  // "Hello" could start "Hello world": held back
  BOOST_TEST(first.text == "");
  for (size_t i = 1; i < ids.size(); ++i) got += o.push(ids[i]).text;
  BOOST_TEST(got == "Hello there");
}

// A model's padded vocabulary rows (Qwen3: ids 151,669 .. 151,935) have no text: a random-weight
// model samples them, and the request must go on (it failed with an internal error).
BOOST_AUTO_TEST_CASE(ids_past_the_tokenizer_have_no_text_and_the_stream_goes_on) {
  output_text o(&qwen3(), {"world"});
  auto ids = qwen3().encode("Hello there, world");
  std::string got;
  for (size_t i = 0; i < ids.size(); ++i) {
    got += o.push(ids[i]).text;
    if (i == 0) BOOST_TEST(o.push(static_cast<int32_t>(qwen3().id_limit())).text == "");
    if (i == 1) BOOST_TEST(o.push(151935).text == "");
  }
  BOOST_TEST(got == "Hello there, ");
  BOOST_TEST(o.stopped());
  output_text bad(&qwen3(), {});
  BOOST_CHECK_THROW(bad.push(-1), troupe::error);
}

BOOST_AUTO_TEST_CASE(no_tokenizer_means_empty_text) {
  output_text o(nullptr, {"x"});
  BOOST_TEST(o.push(5).text == "");
  BOOST_TEST(o.finish() == "");
}

BOOST_AUTO_TEST_SUITE_END()
