// Strict UTF-8 validation: every class of invalid sequence, and the valid boundaries.
#include <boost/test/unit_test.hpp>

#include "runtime/wire/utf8.hpp"

using troupe::wire::is_valid_utf8;
using troupe::wire::valid_utf8_prefix;

BOOST_AUTO_TEST_SUITE(utf8)

BOOST_AUTO_TEST_CASE(valid_text) {
  BOOST_TEST(is_valid_utf8(""));
  BOOST_TEST(is_valid_utf8("plain ascii"));
  BOOST_TEST(is_valid_utf8("caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"));  // é 你好 😀
  BOOST_TEST(is_valid_utf8("\xed\x9f\xbf"));          // U+D7FF, last before the surrogates
  BOOST_TEST(is_valid_utf8("\xf4\x8f\xbf\xbf"));      // U+10FFFF
  BOOST_TEST(is_valid_utf8(std::string("a\0b", 3)));  // NUL is a valid character
}

BOOST_AUTO_TEST_CASE(invalid_sequences_and_where_they_start) {
  BOOST_TEST(valid_utf8_prefix("ab\x80") == 2u);              // lone continuation byte
  BOOST_TEST(valid_utf8_prefix("\xc0\xaf") == 0u);            // overlong '/'
  BOOST_TEST(valid_utf8_prefix("\xe0\x80\xaf") == 0u);        // overlong, 3 bytes
  BOOST_TEST(valid_utf8_prefix("\xf0\x80\x80\xaf") == 0u);    // overlong, 4 bytes
  BOOST_TEST(valid_utf8_prefix("x\xed\xa0\x80") == 1u);       // surrogate U+D800
  BOOST_TEST(valid_utf8_prefix("\xf4\x90\x80\x80") == 0u);    // U+110000
  BOOST_TEST(valid_utf8_prefix("\xf5\x80\x80\x80") == 0u);    // lead byte F5
  BOOST_TEST(valid_utf8_prefix("\xff") == 0u);
  BOOST_TEST(valid_utf8_prefix("ok\xe4\xbd") == 2u);          // truncated at the end
  BOOST_TEST(valid_utf8_prefix("\xe4" "a" "\xbd") == 0u);     // bad continuation
}

BOOST_AUTO_TEST_SUITE_END()
