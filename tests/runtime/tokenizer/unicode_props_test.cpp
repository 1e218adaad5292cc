// The code-point flag table: equal to utf8proc for every BMP code point, the classes the
// pre-tokenizer relies on, and the derived NFC quick check checked against utf8proc's NFC.
#include <boost/test/unit_test.hpp>

#include "runtime/tokenizer/nfc.hpp"
#include "runtime/tokenizer/unicode_props.hpp"
#include "runtime/tokenizer/utf8.hpp"

using namespace troupe::tok;

BOOST_AUTO_TEST_SUITE(unicode_props_suite)

BOOST_AUTO_TEST_CASE(bmp_table_equals_direct_computation) {
  const unicode_props& p = unicode_props::get();
  size_t differ = 0;
  for (char32_t cp = 0; cp < 0x10000; ++cp) differ += p.flags(cp) != p.compute(cp);
  BOOST_TEST(differ == 0u);
}

BOOST_AUTO_TEST_CASE(letter_number_and_space_classes) {
  const unicode_props& p = unicode_props::get();
  BOOST_TEST((p.flags(U'a') & cp_letter));
  BOOST_TEST((p.flags(0x4E00) & cp_letter));    // CJK ideograph (Lo)
  BOOST_TEST((p.flags(0x02B0) & cp_letter));    // modifier letter (Lm)
  BOOST_TEST(!(p.flags(0x0301) & cp_letter));   // combining acute (Mn)
  BOOST_TEST((p.flags(U'7') & cp_number));
  BOOST_TEST((p.flags(0x00B2) & cp_number));    // superscript two (No)
  BOOST_TEST((p.flags(0x2167) & cp_number));    // Roman numeral eight (Nl)
  BOOST_TEST((p.flags(0xFF11) & cp_number));    // fullwidth one
  BOOST_TEST((p.flags(0x1D7CE) & cp_number));   // mathematical bold zero, outside the BMP
  BOOST_TEST((p.flags(0x20000) & cp_letter));   // CJK extension B
  for (char32_t ws : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                      0x205F, 0x3000})
    BOOST_TEST((p.flags(ws) & cp_space), "U+" << std::hex << static_cast<uint32_t>(ws));
  for (char32_t not_ws : {0x200B, 0x180E, 0xFEFF, 0x1C})
    BOOST_TEST(!(p.flags(not_ws) & cp_space), "U+" << std::hex << static_cast<uint32_t>(not_ws));
}

BOOST_AUTO_TEST_CASE(quick_check_yes_means_nfc_leaves_the_character_alone) {
  // Every code point that can decompose lies below U+30000.
  const unicode_props& p = unicode_props::get();
  size_t wrong = 0;
  for (char32_t cp = 0; cp < 0x30000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (!(p.flags(cp) & cp_nfc_yes)) continue;
    std::string s;
    append_utf8(s, cp);
    if (nfc_reference(s) != s) ++wrong;
  }
  BOOST_TEST(wrong == 0u);
  BOOST_TEST(!(p.flags(0x212B) & cp_nfc_yes));  // ANGSTROM SIGN -> U+00C5
  BOOST_TEST(!(p.flags(0x0301) & cp_nfc_yes));  // composes with a preceding letter
  BOOST_TEST(!(p.flags(0x1161) & cp_nfc_yes));  // Hangul vowel jamo
  BOOST_TEST((p.flags(0x00E9) & cp_nfc_yes));   // precomposed é stays
  BOOST_TEST((p.flags(0xAC00) & cp_nfc_yes));   // Hangul syllable stays
}

BOOST_AUTO_TEST_SUITE_END()
