// Per-code-point facts the pre-tokenizer and the NFC quick check need, in one byte per code
// point: a 64 KiB table for the BMP built once per process from utf8proc, utf8proc for the rest.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::tok {

enum cp_flag : uint8_t {
  cp_letter = 1,    // \p{L}: general category Lu Ll Lt Lm Lo
  cp_number = 2,    // \p{N}: Nd Nl No
  cp_space = 4,     // \s: the Unicode White_Space property (what Oniguruma, used by HF, matches)
  cp_nfc_yes = 8,   // NFC_Quick_Check = Yes: never changes under NFC, nor combines with what precedes
  cp_ccc_zero = 16, // canonical combining class 0
};

class unicode_props {
 public:
  static const unicode_props& get();  // thread-safe, built on first use (about a millisecond)

  uint8_t flags(char32_t cp) const noexcept { return cp < 0x10000 ? bmp_[cp] : compute(cp); }
  static int combining_class(char32_t cp) noexcept;

  // Flags derived straight from utf8proc, without the table (the tests compare both).
  uint8_t compute(char32_t cp) const noexcept;

 private:
  unicode_props();
  bool qc_not_yes(char32_t cp) const noexcept { return (qc_not_yes_[cp >> 6] >> (cp & 63)) & 1; }

  std::vector<uint8_t> bmp_;
  std::vector<uint64_t> qc_not_yes_;  // bitset over U+0000..U+10FFFF
};

inline bool is_unicode_white_space(char32_t cp) noexcept {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace troupe::tok
