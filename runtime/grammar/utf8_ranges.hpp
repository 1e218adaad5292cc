// Code point ranges as UTF-8 byte sequences: a character class over Unicode becomes a few
// alternatives of byte ranges, so the grammar (and the matcher) work on bytes only. The splitting
// is the standard one (as in RE2 and Rust's utf8-ranges): cut a range where its bytes stop
// varying independently.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe::grammar {

// Byte ranges, one per byte of the encoding: bytes[i] in [lo, hi] for i < len.
struct utf8_sequence {
  std::array<std::pair<uint8_t, uint8_t>, 4> bytes{};
  int len = 0;
};

// The sequences that match exactly the UTF-8 encodings of code points in [lo, hi] (surrogates
// D800-DFFF excluded, hi clamped to 10FFFF).
std::vector<utf8_sequence> utf8_sequences(uint32_t lo, uint32_t hi);

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace troupe::grammar
