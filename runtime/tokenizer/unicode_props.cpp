// Builds the code-point flag table (see unicode_props.hpp).
//
// NFC_Quick_Check is not exposed by utf8proc, so it is derived here from the decompositions:
// a code point with a canonical decomposition is QC=No when NFC maps it to something else
// (singletons, composition exclusions, non-starter decompositions); otherwise it is a primary
// composite and every code point after the first in its full decomposition can be the second
// half of a composition (QC=Maybe; marking all of them is conservative, which only costs speed).
// Hangul V and T jamo compose algorithmically with a preceding syllable or jamo: Maybe as well.
#include "runtime/tokenizer/unicode_props.hpp"

#include <cstdlib>
#include <utf8proc.h>

#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

namespace {

constexpr char32_t max_cp = 0x110000;
// No code point above this has a canonical decomposition (the last is U+2FA1D).
constexpr char32_t decomposition_limit = 0x30000;

bool nfc_is_identity(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  bool same = n >= 0 && std::string_view(reinterpret_cast<char*>(out), static_cast<size_t>(n)) == s;
  std::free(out);
  return same;
}

}  // namespace

int unicode_props::combining_class(char32_t cp) noexcept {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class;
}

unicode_props::unicode_props() : bmp_(0x10000), qc_not_yes_(max_cp / 64, 0) {
  auto mark = [this](char32_t cp) { qc_not_yes_[cp >> 6] |= uint64_t{1} << (cp & 63); };
  for (char32_t cp = 0; cp < decomposition_limit; ++cp) {
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0) continue;  // none or compat only
    if (!nfc_is_identity(cp)) {
      mark(cp);
      continue;
    }
    utf8proc_int32_t parts[8];
    utf8proc_int32_t boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts, 8,
                                                 UTF8PROC_DECOMPOSE, &boundclass);
    for (utf8proc_ssize_t i = 1; i < n && i < 8; ++i) mark(static_cast<char32_t>(parts[i]));
  }
  for (char32_t cp = 0x1160; cp <= 0x11FF; ++cp) mark(cp);  // Hangul V and T jamo (and fillers)
  for (char32_t cp = 0; cp < 0x10000; ++cp) bmp_[cp] = compute(cp);
}

uint8_t unicode_props::compute(char32_t cp) const noexcept {
  if (cp >= max_cp) return 0;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  uint8_t f = 0;
  switch (p->category) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: f |= cp_letter; break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: f |= cp_number; break;
    default: break;
  }
  if (is_unicode_white_space(cp)) f |= cp_space;
  if (!qc_not_yes(cp)) f |= cp_nfc_yes;
  if (p->combining_class == 0) f |= cp_ccc_zero;
  return f;
}

const unicode_props& unicode_props::get() {
  static const unicode_props* props = new unicode_props();  // never destroyed: used at exit too
  return *props;
}

}  // namespace troupe::tok
