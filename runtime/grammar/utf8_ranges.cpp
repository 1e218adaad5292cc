#include "runtime/grammar/utf8_ranges.hpp"

#include <string>

namespace troupe::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] with one encoded length; split until every byte position is an independent range.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<utf8_sequence>& out) {
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  utf8_sequence s;
  s.len = n;
  for (int i = 0; i < n; ++i)
    s.bytes[static_cast<size_t>(i)] = {static_cast<uint8_t>(a[static_cast<size_t>(i)]),
                                       static_cast<uint8_t>(b[static_cast<size_t>(i)])};
  out.push_back(s);
}

void split_lengths(uint32_t lo, uint32_t hi, std::vector<utf8_sequence>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      split_lengths(lo, edge, out);
      split_lengths(edge + 1, hi, out);
      return;
    }
  }
  split_same_length(lo, hi, out);
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<utf8_sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<utf8_sequence> out;
  if (hi > kMaxCodePoint) hi = kMaxCodePoint;
  if (lo > hi) return out;
  // Surrogates have no UTF-8 encoding.
  if (lo < 0xD800 && hi > 0xDFFF) {
    split_lengths(lo, 0xD7FF, out);
    split_lengths(0xE000, hi, out);
  } else if (lo >= 0xD800 && hi <= 0xDFFF) {
    return out;
  } else {
    if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
    if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
    if (lo <= hi) split_lengths(lo, hi, out);
  }
  return out;
}

}  // namespace troupe::grammar
