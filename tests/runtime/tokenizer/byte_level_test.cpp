// The ByteLevel alphabet (GPT-2's bytes_to_unicode): a bijection between the 256 bytes and
// printable code points, with the well-known images of space, newline and 0xAD.
#include <boost/test/unit_test.hpp>

#include <set>

#include "runtime/tokenizer/byte_level.hpp"

using namespace troupe::tok;

BOOST_AUTO_TEST_SUITE(byte_level_suite)

BOOST_AUTO_TEST_CASE(alphabet_is_a_bijection) {
  const byte_level& bl = byte_level::get();
  std::set<char32_t> images;
  for (int b = 0; b < 256; ++b) {
    char32_t c = bl.byte_to_char(static_cast<uint8_t>(b));
    images.insert(c);
    BOOST_TEST(bl.char_to_byte(c) == b);
  }
  BOOST_TEST(images.size() == 256u);
  BOOST_TEST(bl.char_to_byte(U' ') == -1);      // space itself is not in the alphabet
  BOOST_TEST(bl.char_to_byte(0x0144) == -1);
}

BOOST_AUTO_TEST_CASE(known_images) {
  const byte_level& bl = byte_level::get();
  BOOST_TEST(static_cast<uint32_t>(bl.byte_to_char(' ')) == 0x0120u);   // Ġ
  BOOST_TEST(static_cast<uint32_t>(bl.byte_to_char('\n')) == 0x010Au);  // Ċ
  BOOST_TEST(static_cast<uint32_t>(bl.byte_to_char('a')) == static_cast<uint32_t>('a'));
  BOOST_TEST(static_cast<uint32_t>(bl.byte_to_char(0xE9)) == 0xE9u);
  BOOST_TEST(static_cast<uint32_t>(bl.byte_to_char(0xAD)) == 0x0143u);  // the last of the 68 remapped
  BOOST_TEST(bl.encode(" hi\n") == "\xC4\xA0hi\xC4\x8A");
  BOOST_TEST(bl.decode("\xC4\xA0hi\xC4\x8A").value() == " hi\n");
  BOOST_TEST(!bl.decode("a b").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
