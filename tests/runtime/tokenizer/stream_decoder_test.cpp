// Streaming detokenisation: deltas are whole UTF-8 characters, their concatenation equals
// decode() for every reference case, and multi-byte characters split across tokens (4-byte
// emoji included) appear exactly when their last byte arrives.
#include <boost/test/unit_test.hpp>

#include "runtime/tokenizer/utf8.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using troupe::stream_decoder;
using troupe::test::qwen;

namespace {
const std::string fffd = "\xEF\xBF\xBD";
}

BOOST_AUTO_TEST_SUITE(stream_decoding)

BOOST_AUTO_TEST_CASE(concatenated_deltas_equal_decode_for_every_case) {
  for (bool skip : {false, true}) {
    for (const auto& c : troupe::test::tokenizer_cases()) {
      auto ids = c["ids"].get<std::vector<int32_t>>();
      stream_decoder sd(qwen(), skip);
      std::string joined;
      for (int32_t id : ids) {
        std::string delta = sd.push(id);
        BOOST_TEST(troupe::tok::find_invalid_utf8(delta) == troupe::tok::npos);
        BOOST_TEST(sd.pending_bytes() <= 3u);
        joined += delta;
      }
      joined += sd.finish();
      BOOST_TEST(joined == qwen().decode(ids, skip), "case " << c["text"].dump());
    }
  }
}

BOOST_AUTO_TEST_CASE(four_byte_emoji_split_across_three_tokens) {
  // " 🎉" = " \xF0\x9F" + "\x8E" + "\x89"
  stream_decoder sd(qwen());
  BOOST_TEST(sd.push(11162) == " ");
  BOOST_TEST(sd.pending_bytes() == 2u);
  BOOST_TEST(sd.push(236) == "");
  BOOST_TEST(sd.push(231) == "\xF0\x9F\x8E\x89");
  BOOST_TEST(sd.finish() == "");
}

BOOST_AUTO_TEST_CASE(every_emoji_of_the_cases_streams_byte_exact) {
  // Encode each 4-byte character alone and check it appears only with its last token.
  for (std::string emoji : {"\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
                            "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7"}) {
    auto ids = qwen().encode(emoji);
    stream_decoder sd(qwen());
    std::string joined;
    for (int32_t id : ids) {
      std::string d = sd.push(id);
      BOOST_TEST(troupe::tok::find_invalid_utf8(d) == troupe::tok::npos);  // never part of a character
      joined += d;
      BOOST_TEST(emoji.compare(0, joined.size(), joined) == 0);
    }
    BOOST_TEST(joined == emoji);  // complete with the last token, before finish()
    BOOST_TEST(sd.finish() == "");
  }
}

BOOST_AUTO_TEST_CASE(broken_utf8_becomes_replacement_characters_in_place) {
  stream_decoder sd(qwen());
  BOOST_TEST(sd.push(236) == fffd);               // a lone continuation byte: decided at once
  BOOST_TEST(sd.push(11162) == " ");              // " \xF0\x9F": the lead waits
  BOOST_TEST(sd.push(9707) == fffd + "Hello");    // cut short by "Hello"
  BOOST_TEST(sd.push(11162) == " ");
  BOOST_TEST(sd.finish() == fffd);                // unfinished at the end
  BOOST_TEST(sd.pending_bytes() == 0u);
  BOOST_TEST(sd.push(9707) == "Hello");           // reusable after finish()
}

BOOST_AUTO_TEST_CASE(bad_id_throws_and_leaves_the_state_alone) {
  stream_decoder sd(qwen());
  BOOST_TEST(sd.push(11162) == " ");
  troupe::test::expect_error([&] { sd.push(200000); }, troupe::errc::out_of_range, "token id 200000");
  BOOST_TEST(sd.pending_bytes() == 2u);
  BOOST_TEST(sd.push(236) == "");
  BOOST_TEST(sd.push(231) == "\xF0\x9F\x8E\x89");
}

BOOST_AUTO_TEST_CASE(skip_special_tokens_while_streaming) {
  stream_decoder sd(qwen(), true);
  BOOST_TEST(sd.push(151644) == "");  // <|im_start|>
  BOOST_TEST(sd.push(9707) == "Hello");
  BOOST_TEST(sd.push(151667) == "<think>");  // added but not special: kept
  BOOST_TEST(sd.push(151645) == "");
}

BOOST_AUTO_TEST_SUITE_END()
