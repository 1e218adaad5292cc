// UTF-8 validation (first bad byte), encoding, and lossy decoding grouped as Rust's
// from_utf8_lossy / the Unicode "maximal subpart" practice.
#include <boost/test/unit_test.hpp>

#include "runtime/tokenizer/utf8.hpp"

using namespace troupe::tok;

namespace {
std::string lossy(std::string_view s) {
  std::string out;
  append_lossy(out, s);
  return out;
}
const std::string fffd = "\xEF\xBF\xBD";
}  // namespace

BOOST_AUTO_TEST_SUITE(utf8)

BOOST_AUTO_TEST_CASE(validation_finds_the_first_bad_byte) {
  BOOST_TEST(find_invalid_utf8("") == npos);
  BOOST_TEST(find_invalid_utf8("plain ascii, long enough for the 8-byte path") == npos);
  BOOST_TEST(find_invalid_utf8("h\xC3\xA9llo \xE4\xB8\x80 \xF0\x9F\x98\x80") == npos);
  BOOST_TEST(find_invalid_utf8("abcdefgh\x80") == 8u);           // lone continuation
  BOOST_TEST(find_invalid_utf8("\xC0\xAF") == 0u);               // overlong '/'
  BOOST_TEST(find_invalid_utf8("\xE0\x80\xAF") == 0u);           // overlong, 3 bytes
  BOOST_TEST(find_invalid_utf8("ab\xED\xA0\x80") == 2u);         // surrogate U+D800
  BOOST_TEST(find_invalid_utf8("\xF4\x90\x80\x80") == 0u);       // above U+10FFFF
  BOOST_TEST(find_invalid_utf8("\xF5\x80\x80\x80") == 0u);
  BOOST_TEST(find_invalid_utf8("x\xE4\xB8") == 1u);              // truncated at the end
  BOOST_TEST(find_invalid_utf8("x\xE4" "a") == 1u);
  BOOST_TEST(find_invalid_utf8(std::string("a\0b", 3)) == npos);  // NUL is valid
}

BOOST_AUTO_TEST_CASE(encode_and_decode_round_trip_every_length) {
  for (char32_t cp : {U'\0', U'A', U'\x7F', U'\x80', U'\x7FF', U'\x800', U'\xFFFF', U'\x10000', U'\x10FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    BOOST_TEST(find_invalid_utf8(s) == npos);
    char32_t back;
    int len = decode_utf8(reinterpret_cast<const unsigned char*>(s.data()), back);
    BOOST_TEST(static_cast<size_t>(len) == s.size());
    BOOST_TEST(static_cast<uint32_t>(back) == static_cast<uint32_t>(cp));
  }
}

BOOST_AUTO_TEST_CASE(lossy_decoding_replaces_maximal_subparts) {
  BOOST_TEST(lossy("ok") == "ok");
  BOOST_TEST(lossy("\xF0\x9F\x98") == fffd);                       // one truncated sequence: one U+FFFD
  BOOST_TEST(lossy("\xF0\x9F\x98x") == fffd + "x");
  BOOST_TEST(lossy("\x80\x80") == fffd + fffd);                    // each stray continuation byte
  BOOST_TEST(lossy("\xC0\xAF") == fffd + fffd);                    // C0 is never a lead byte
  BOOST_TEST(lossy("\xED\xA0\x80") == fffd + fffd + fffd);         // surrogate: ED then two strays
  BOOST_TEST(lossy("\xE4\xB8\xE4\xB8\x80") == fffd + "\xE4\xB8\x80");
  BOOST_TEST(lossy("a\xFF" "b") == "a" + fffd + "b");
}

BOOST_AUTO_TEST_CASE(incomplete_sequences_wait_unless_at_end) {
  const auto* p = reinterpret_cast<const unsigned char*>("\xF0\x9F\x98");
  lossy_item wait = next_lossy_item(p, 3, false);
  BOOST_TEST(wait.length == 0u);
  lossy_item end = next_lossy_item(p, 3, true);
  BOOST_TEST(end.length == 3u);
  BOOST_TEST(!end.valid);
  const auto* bad = reinterpret_cast<const unsigned char*>("\xF0\x41");
  lossy_item no_wait = next_lossy_item(bad, 2, false);  // cannot complete: decided now
  BOOST_TEST(no_wait.length == 1u);
  BOOST_TEST(!no_wait.valid);
}

BOOST_AUTO_TEST_SUITE_END()
