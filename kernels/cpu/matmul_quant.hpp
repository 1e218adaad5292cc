// kernels::matmul for quantized weights (INT8 with per-group scales, FP8 e4m3 with block scales):
// the weight checks and the tests' float64 reference.
//
// The arithmetic (kernels::quant_arithmetic() "dequant"): every weight is the float32 product
// value(q[j][k]) * scale (INT8: float(code); FP8: the e4m3 value, the NaN codes 0x7f / 0xff as +-480),
// rounded once, and y is the float kernels' 16-lane dot product of x with those weights
// (matmul_backend.hpp): each back-end widens the codes in its tiles (matmul_avx512.cpp,
// matmul_avx2.cpp, matmul_generic.cpp), bit-identical to the portable float back-end on the
// dequantised matrix. A result depends only on x's row, w's row and the shape, so batch and
// chunking invariance hold as for float weights; never a full-precision copy of the weights.
//
// It replaced a "grouped" arithmetic (INT8 as exact integer sums of 30-bit fixed-point activations
// per scale group, FP8 sums per group, one multiply by the scale each): ~3x fewer instructions per
// weight at one sequence, but its per-group finish cost half as much again as the dot products at
// group 128, so batches and prompts ran at 0.5x BF16. The float tiles widen each code once per
// panel there; on AVX-512 (0.6B shape, `troupe-bench-matmul --dtype int8 --shape model`) the layers
// took 16.7-17.0 ms at n = 1 (grouped 16.9-17.8) and 336-341 ms at n = 64 (grouped 587-628).
#pragma once

#include <cstdint>

#include "kernels/kernels.hpp"
#include "kernels/u4_layout.hpp"

namespace troupe::kernels::cpu {

// Checks a quantized weight_ref (codes, scales, group shape); throws troupe::error naming what is
// wrong. matmul() calls it for every i8 / u4 / f8 weight. A 16-column block lies in one scale
// group: INT8 and u4 groups are powers of two of at least 32 columns or the whole row; FP8 groups
// are multiples of 16 or the whole row. u4 also needs its zeros and cols a multiple of 16.
void check_quantized_weight(const weight_ref& w);

// The float64 product of x and the dequantised weights (code * scale, no rounding of the weights):
// the tests' reference for what the kernels must approximate within float32 noise.
void matmul_dequant_reference(const float* x, int64_t n, const weight_ref& w, float* y);

inline float scale_of(const weight_ref& w, int64_t row, int64_t col) {
  return w.scales[(row / w.group_rows) * w.scale_cols() + col / w.group_cols];
}

// The integer or FP8 value of element (r, c)'s code, exact in float32: INT8 code, u4 q - zero, e4m3.
inline float code_value(const weight_ref& w, int64_t r, int64_t c) {
  if (w.type == dtype::u4) return static_cast<float>(u4_code(w, r, c));
  const uint8_t code = static_cast<const uint8_t*>(w.data)[r * w.cols + c];
  return w.type == dtype::i8 ? static_cast<float>(static_cast<int8_t>(code)) : f8e4m3_to_f32(code);
}

// The SIMD tiles' view of one row's scales: of(k) is the scale of columns k .. k + 15, group(k)
// its index in the row's scales (and zeros).
struct scale_cursor {
  const float* s;  // the row's scales
  int shift;       // group = 2^shift columns (62: one group a row); -1: divide by group
  int64_t group;
  static scale_cursor at(const weight_ref& w, int64_t j) {
    const int64_t g = w.group_cols;
    const int shift = g >= w.cols ? 62 : (g & (g - 1)) == 0 ? __builtin_ctzll(static_cast<uint64_t>(g)) : -1;
    return {w.scales + (j / w.group_rows) * w.scale_cols(), shift, g};
  }
  int64_t group_of(int64_t k) const { return shift >= 0 ? k >> shift : k / group; }
  const float* of(int64_t k) const { return s + group_of(k); }
};

}  // namespace troupe::kernels::cpu
