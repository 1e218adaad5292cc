// UTF-8 validation, encoding and lossy decoding (see utf8.hpp).
#include "runtime/tokenizer/utf8.hpp"

#include <cstring>

namespace troupe::tok {

namespace {

// Valid range of the second byte for lead byte c (Unicode Table 3-7); lo > hi: c is no lead.
struct second_range {
  unsigned char lo, hi;
  int length;
};

inline second_range lead_info(unsigned c) noexcept {
  if (c < 0x80) return {1, 0, 1};
  if (c < 0xC2) return {1, 0, 0};
  if (c < 0xE0) return {0x80, 0xBF, 2};
  if (c == 0xE0) return {0xA0, 0xBF, 3};
  if (c == 0xED) return {0x80, 0x9F, 3};
  if (c < 0xF0) return {0x80, 0xBF, 3};
  if (c == 0xF0) return {0x90, 0xBF, 4};
  if (c < 0xF4) return {0x80, 0xBF, 4};
  if (c == 0xF4) return {0x80, 0x8F, 4};
  return {1, 0, 0};
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, eight bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    second_range r = lead_info(c);
    if (r.length == 0) return i;
    if (i + 1 >= n || p[i + 1] < r.lo || p[i + 1] > r.hi) return i;
    for (int k = 2; k < r.length; ++k) {
      if (i + k >= n || (p[i + k] & 0xC0) != 0x80) return i;
    }
    i += static_cast<size_t>(r.length);
  }
  return npos;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

lossy_item next_lossy_item(const unsigned char* p, size_t n, bool at_end) noexcept {
  unsigned c = p[0];
  if (c < 0x80) return {1, true};
  second_range r = lead_info(c);
  if (r.length == 0) return {1, false};
  // Count the bytes that still form a prefix of a well-formed sequence.
  size_t good = 1;
  while (good < static_cast<size_t>(r.length) && good < n) {
    unsigned b = p[good];
    bool ok = good == 1 ? (b >= r.lo && b <= r.hi) : (b & 0xC0) == 0x80;
    if (!ok) return {good, false};  // the maximal subpart so far is one U+FFFD
    ++good;
  }
  if (good == static_cast<size_t>(r.length)) return {good, true};
  // Ran out of bytes inside a sequence that may still complete.
  if (!at_end) return {0, false};
  return {good, false};
}

void append_lossy(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    lossy_item it = next_lossy_item(p + i, n - i, true);
    if (it.valid) {
      out.append(bytes.data() + i, it.length);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += it.length;
  }
}

}  // namespace troupe::tok
