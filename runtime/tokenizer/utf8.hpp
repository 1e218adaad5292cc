// UTF-8 primitives of the tokenizer: validation that names the first bad byte, decoding of
// already-validated text, encoding, and the lossy decoding Hugging Face applies to token bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::tok {

inline constexpr size_t npos = static_cast<size_t>(-1);

// Byte offset of the first byte that does not start or continue a well-formed UTF-8 sequence
// (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or npos.
size_t find_invalid_utf8(std::string_view text) noexcept;

// Decodes the code point at p of VALID UTF-8 (checked before); returns its length in bytes.
inline int decode_utf8(const unsigned char* p, char32_t& cp) noexcept {
  unsigned c = p[0];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if (c < 0xE0) {
    cp = ((c & 0x1F) << 6) | (p[1] & 0x3F);
    return 2;
  }
  if (c < 0xF0) {
    cp = ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return 3;
  }
  cp = ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  return 4;
}

// Length of the UTF-8 sequence that lead byte c starts (valid text only).
inline int utf8_length(unsigned char c) noexcept {
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, char32_t cp);

// One step of lossy decoding over bytes [p, p + n), n > 0. Returns how many bytes the next
// item takes and whether it is a valid character (else it is one U+FFFD). When the bytes end
// inside a sequence that could still become valid, returns 0 unless `at_end`: the streaming
// decoder then waits for more bytes. The grouping of bad bytes is Rust's from_utf8_lossy
// (the Unicode "maximal subpart" practice), which Hugging Face's ByteLevel decoder uses.
struct lossy_item {
  size_t length;  // 0: incomplete, wait for more bytes
  bool valid;
};
lossy_item next_lossy_item(const unsigned char* p, size_t n, bool at_end) noexcept;

// Appends `bytes` to `out` as UTF-8, each ill-formed subpart replaced by U+FFFD.
void append_lossy(std::string& out, std::string_view bytes);

}  // namespace troupe::tok
