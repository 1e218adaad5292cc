// The u4 weight layout (kernels.hpp, weight_ref): which nibble of a 16-column block's 64-bit word
// holds a column, an element's q and code, the zeros' size. Shared by the kernels, the loaders
// that pack u4 weights, the writer that widens them back to INT8 codes and the weight accounting.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.hpp"

namespace troupe::kernels {

// The nibble (0..15: bits 4n .. 4n + 3 of the block's little-endian word) that holds column c:
// even columns 2i at nibble i (the low 32 bits), odd columns 2i + 1 at nibble 8 + i.
inline int u4_nibble(int64_t c) noexcept { return static_cast<int>((c % 2) * 8 + (c % 16) / 2); }

// The q (0..15, before its zero) of element (r, c) of a u4 weight.
inline int u4_q(const weight_ref& w, int64_t r, int64_t c) noexcept {
  const int n = u4_nibble(c);
  const uint8_t b = static_cast<const uint8_t*>(w.data)[r * (w.cols / 2) + c / 16 * 8 + n / 2];
  return n % 2 == 0 ? b & 15 : b >> 4;
}

// The INT8 code q - zero of element (r, c) of a u4 weight: the value its scale multiplies.
inline int u4_code(const weight_ref& w, int64_t r, int64_t c) noexcept {
  return u4_q(w, r, c) - w.zeros[r * w.scale_cols() + c / w.group_cols];
}

// Bytes of a weight's zero points (one a scale group; 0 for weights without them).
inline size_t zero_bytes(const weight_ref& w) noexcept {
  return w.zeros ? static_cast<size_t>(w.scale_rows() * w.scale_cols()) : 0;
}

}  // namespace troupe::kernels
