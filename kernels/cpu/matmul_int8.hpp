// kernels::matmul for quantized weights (INT8 with per-group scales, FP8 e4m3 with block scales):
// the dispatch (matmul_int8.cpp), the per-instruction-set back-ends (matmul_int8_*.cpp,
// matmul_fp8_*.cpp) and the canonical arithmetic every back-end reproduces bit for bit.
//
// INT8 (W8A16): each activation row x is turned, once per call, into 30-bit fixed point with a
// power-of-two scale: amax = max|x|, p = frexp exponent of amax (amax < 2^p), e = 30 - p,
// a[k] = round_to_nearest_even(x[k] * 2^e) (|a| < 2^30; exact for every |x[k]| >= amax / 64), split
// as a = 32768 * hi + lo with hi int16 and lo in [0, 32767]. Then, for output j:
//   columns go in blocks of B = min(group_cols, 512) (one group per row: B = 512); within a block,
//   lane l (0..15) sums exactly, in int32, HI[l] = sum hi[k] * q[j][k] and LO[l] = sum lo[k] * q[j][k]
//   over the columns k of the block with (k % 32) / 2 == l (what vpdpwssd computes on 32 columns);
//   per block: v[l] = fma(float(HI[l]), 32768, float(LO[l])), acc[l] = fma(v[l], scale, acc[l]);
//   y = ldexp(tree(acc), -e), tree = the 16-lane tree of matmul_backend.hpp (acc[l] + acc[l+8], ...).
// Integer sums are exact, so the result depends only on x's row, w's row and the shape: never on
// n, tiles, threads or the back-end. A row holding inf or NaN gives NaN outputs.
//
// FP8 (e4m3, block scales): every code widens exactly to v' = value * 2^-8 (the f16 bit trick);
// per group of group_cols columns, lane l accumulates p[l] = fma(x[k], v'[k], p[l]) in increasing k
// over k % 16 == l (zero-padded tail), then acc[l] = fma(p[l], scale * 256, acc[l]); y = tree(acc).
//
// Those two are the "grouped" arithmetic (kernels::quant_arithmetic(); AVX-512 and portable
// back-ends, these files). CPUs whose best back-end is AVX2 (no vpdpwssd, no zmm: INT8's planes
// cost 10 instructions per 32 weights and row) run the "dequant" one instead (matmul.cpp): every
// weight is the float32 product value(q[j][k]) * scale (INT8: float(code); FP8: the e4m3 value,
// NaN codes as +-480 as above), and y is the float kernels' 16-lane dot product of x with those
// weights (matmul_backend.hpp, matmul_avx2.cpp), bit-identical to the portable float back-end on
// the dequantised matrix. Also exact per row: batch and chunking invariance hold the same way.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.hpp"

namespace troupe::kernels::cpu {

// Activation rows prepared once per call and shared by every thread.
struct quant_activations {
  int64_t n = 0;
  int64_t cols = 0;
  int64_t stride = 0;          // padded row length (multiple of 32); pad columns are zero
  const int16_t* hi = nullptr;  // INT8 path: [n, stride]
  const int16_t* lo = nullptr;  // INT8 path: [n, stride]
  const int32_t* exp = nullptr; // INT8 path: e per row; kNonFinite for a row holding inf/NaN
  const float* x = nullptr;     // FP8 path: [n, stride], zero-padded copy of x
};
inline constexpr int32_t kNonFinite = INT32_MIN;
// INT8 batches up to this size run the decode tiles once per <= 3 activation rows (AVX-512
// back-ends; each pass after the first finds the unit's 256 rows in L2). The 64-row-panel path
// built for prefill made small batches slower than BF16: on the 0.6B shape (`troupe-bench-quant`)
// batch 4 / 8 / 16 went from 48 / 65 / 84 to 86 / 88-94 / 90 tokens/s. Same tiles, same bits.
inline constexpr int64_t int8_passes_max_n = 16;
inline constexpr int64_t kBlockCols = 512;  // largest INT8 integer block (no int32 overflow)

// One back-end: y[i][j] for every i < n and j0 <= j < j1 (y has row stride w.rows). `scratch` is
// per-thread, scratch_floats(n, w) floats, 64-byte aligned. Rows [pf0, pf1) are the unit this
// thread probably takes next: a hint to prefetch, never a change of result.
struct quant_backend {
  const char* name;
  size_t (*scratch_floats)(int64_t n, const weight_ref& w);
  void (*run)(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
              int64_t pf0, int64_t pf1);
};

const quant_backend& int8_backend_avx512_vnni();  // AVX512-VNNI vpdpwssd
const quant_backend& int8_backend_avx512();       // the same with vpmaddwd + vpaddd
const quant_backend& int8_backend_generic();
const quant_backend& fp8_backend_avx512();
const quant_backend& fp8_backend_generic();

// The best back-end this CPU can run for `type` (i8 or f8_e4m3) in the grouped arithmetic; honours
// TROUPE_ISA as matmul() does (generic, or avx2 where matmul() runs the dequantised arithmetic
// instead, select the portable back-ends).
const quant_backend& best_quant_backend(dtype type);

// Checks a quantized weight_ref (codes, scales, group shape); throws troupe::error naming what is
// wrong. matmul() calls it for every i8 / f8 weight.
void check_quantized_weight(const weight_ref& w);

// kernels::matmul for i8 / f8_e4m3 weights with a given back-end (tests run each one).
void matmul_quantized(const float* x, int64_t n, const weight_ref& w, float* y, const quant_backend& b);
void matmul_quantized(const float* x, int64_t n, const weight_ref& w, float* y);

// The float64 product of x and the dequantised weights (code * scale, no activation rounding):
// the tests' reference for what the kernels must approximate within float32 noise.
void matmul_dequant_reference(const float* x, int64_t n, const weight_ref& w, float* y);

// Helpers shared by back-ends and the quantizer.
// Prepares one activation row: hi/lo [stride] (pad zeroed), returns e (or kNonFinite).
int32_t quantize_activation_row(const float* x, int64_t cols, int64_t stride, int16_t* hi, int16_t* lo);
inline float scale_of(const weight_ref& w, int64_t row, int64_t col) {
  return w.scales[(row / w.group_rows) * w.scale_cols() + col / w.group_cols];
}
// The fixed 16-lane tree of matmul_backend.hpp.
inline float tree16(const float* acc) {
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[l] + acc[l + 8];
  for (int l = 0; l < 4; ++l) s[l] += s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] += s[l + 2];
  return s[0] + s[1];
}
// ldexp(v, k) without a libm call per element: multiplying by 2^k is exact, and rounds a subnormal
// result once, exactly as ldexp does, whenever 2^k is a normal float; other k take ldexp. (A call
// per output row cost ~10% of an INT8 decode step.)
inline float scale_pow2(float v, int32_t k) {
  if (k < -126 || k > 127) return std::ldexp(v, k);
  return v * std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
}
// Integer block length of an INT8 weight (see above).
inline int64_t int8_block_cols(const weight_ref& w) {
  return w.group_cols >= w.cols || w.group_cols > kBlockCols ? kBlockCols : w.group_cols;
}

}  // namespace troupe::kernels::cpu
