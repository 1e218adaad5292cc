// NFC with the quick check: texts already in NFC come back as the same view, others equal
// utf8proc's NFC of the whole text, including on random mixes of tricky characters.
#include <boost/test/unit_test.hpp>

#include <random>

#include "runtime/tokenizer/nfc.hpp"
#include "runtime/tokenizer/utf8.hpp"

using namespace troupe::tok;

BOOST_AUTO_TEST_SUITE(nfc)

BOOST_AUTO_TEST_CASE(normalised_text_is_not_copied) {
  std::string storage;
  std::string text = "Already NFC: \xC3\xA9t\xC3\xA9, \xE4\xB8\x80, \xF0\x9F\x98\x80, \xD8\xA8\xD9\x90";
  std::string_view out = nfc_normalize(text, storage);
  BOOST_TEST(static_cast<const void*>(out.data()) == static_cast<const void*>(text.data()));
  BOOST_TEST(out.size() == text.size());
}

BOOST_AUTO_TEST_CASE(known_compositions) {
  std::string storage;
  BOOST_TEST(std::string(nfc_normalize("e\xCC\x81", storage)) == "\xC3\xA9");               // e + U+0301 -> é
  BOOST_TEST(std::string(nfc_normalize("\xE2\x84\xAB", storage)) == "\xC3\x85");            // U+212B -> U+00C5
  BOOST_TEST(std::string(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1", storage)) == "\xEA\xB0\x80");  // jamo -> 가
  // Marks out of canonical order are reordered: a + U+0301 (230) + U+0323 (220) -> ạ́
  BOOST_TEST(std::string(nfc_normalize("a\xCC\x81\xCC\xA3", storage)) == nfc_reference("a\xCC\xA3\xCC\x81"));
  BOOST_TEST(std::string(nfc_normalize("x e\xCC\x81 y", storage)) == "x \xC3\xA9 y");
  BOOST_TEST(std::string(nfc_normalize("\xEF\xAC\x81", storage)) == "\xEF\xAC\x81");        // ligature kept (not NFKC)
}

BOOST_AUTO_TEST_CASE(random_mixes_equal_whole_text_normalisation) {
  // Bases, combining marks of several classes, jamo, singletons and excluded characters.
  const char32_t pool[] = {U'a',    U'e',    U'A',    U' ',    U'\n',   0x00E9, 0x0301, 0x0323, 0x0308, 0x0304,
                           0x0344,  0x212B,  0x2126,  0x1100,  0x1161,  0x11A8, 0xAC00, 0x0958, 0x0915, 0x093C,
                           0x0929,  0x0BC6,  0x0BBE,  0x0F73,  0x05D0,  0x05B7, 0x05B8, 0x0627, 0x064E, 0x0651,
                           0x3099,  0x304B,  0x1E63,  0x0307,  0xF900,  0x2F800, 0x1F600, 0x4E00, 0x0E01, 0x0E48};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1), len(0, 24);
  std::string storage;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    for (size_t n = len(rng); n > 0; --n) append_utf8(s, pool[pick(rng)]);
    std::string got(nfc_normalize(s, storage));
    std::string want = nfc_reference(s);
    if (got != want) {
      BOOST_ERROR("NFC differs for input bytes of length " << s.size());
      break;
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
