// NFC with a quick check (see nfc.hpp). A text may be cut before any character that has
// combining class 0 and NFC_Quick_Check=Yes: nothing before it can reorder or compose across it
// (the same boundary ICU and Rust's unicode-normalization use), so normalising each stretch
// between such boundaries separately equals normalising the whole.
#include "runtime/tokenizer/nfc.hpp"

#include <cstdlib>
#include <utf8proc.h>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/unicode_props.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

namespace {

constexpr uint8_t boundary_flags = cp_nfc_yes | cp_ccc_zero;

void append_nfc(std::string& out, std::string_view text) {
  utf8proc_uint8_t* res = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &res,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    std::free(res);
    throw_error(errc::internal, std::string("utf8proc NFC failed: ") + utf8proc_errmsg(n));
  }
  out.append(reinterpret_cast<const char*>(res), static_cast<size_t>(n));
  std::free(res);
}

}  // namespace

std::string nfc_reference(std::string_view text) {
  std::string out;
  append_nfc(out, text);
  return out;
}

std::string_view nfc_normalize(std::string_view text, std::string& storage) {
  const unicode_props& props = unicode_props::get();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t copied = 0;         // text[0, copied) is already in storage (once copying has started)
  bool copying = false;
  size_t last_boundary = 0;  // start of the last character that is a safe boundary
  int last_ccc = 0;
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {  // ASCII: boundary, class 0
      last_boundary = i++;
      last_ccc = 0;
      continue;
    }
    char32_t cp;
    int len = decode_utf8(p + i, cp);
    uint8_t f = props.flags(cp);
    if ((f & boundary_flags) == boundary_flags) {
      last_boundary = i;
      last_ccc = 0;
      i += static_cast<size_t>(len);
      continue;
    }
    if (f & cp_nfc_yes) {  // a combining mark: fine while classes do not decrease
      int ccc = unicode_props::combining_class(cp);
      if (ccc >= last_ccc) {
        last_ccc = ccc;
        i += static_cast<size_t>(len);
        continue;
      }
    }
    // Normalise [last_boundary, next boundary) through utf8proc.
    size_t j = i + static_cast<size_t>(len);
    while (j < n) {
      if (p[j] < 0x80) break;
      char32_t c2;
      int l2 = decode_utf8(p + j, c2);
      if ((props.flags(c2) & boundary_flags) == boundary_flags) break;
      j += static_cast<size_t>(l2);
    }
    if (!copying) {
      storage.clear();
      storage.reserve(n + 16);
      copying = true;
    }
    storage.append(text.data() + copied, last_boundary - copied);
    append_nfc(storage, text.substr(last_boundary, j - last_boundary));
    copied = j;
    i = j;
    last_boundary = j;
    last_ccc = 0;
  }
  if (!copying) return text;
  storage.append(text.data() + copied, n - copied);
  return storage;
}

}  // namespace troupe::tok
