// The bf16 compute mode of kernels::matmul (compute_dtype::bf16, kernels.hpp) for BF16 weights:
// the arithmetic of AVX512_BF16 vdpbf16ps, defined here in scalar C++, and its back-ends.
// Every back-end gives these exact bits, so results do not depend on the machine or on n, except
// the AMX tiles' (their own sums). The interface also carries the f32 mode's AMX back-end
// (matmul_f32_backend_amx: x split into three bf16 parts), which packs x the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kernels.hpp"

namespace troupe::kernels::cpu {

// Activation rows rounded to bf16 (f32_to_bf16), each zero-padded to a multiple of 32 columns: one
// vdpbf16ps input per 32 columns, so a back-end never reads a partial activation block.
inline int64_t bf16_padded_cols(int64_t cols) { return (cols + 31) / 32 * 32; }

// A bf16 as vdpbf16ps reads it: widened exactly, subnormals as zero of the same sign (DAZ).
inline float bf16_daz(uint16_t v) {
  return bf16_to_f32((v & 0x7f80u) == 0 ? static_cast<uint16_t>(v & 0x8000u) : v);
}

// acc + a * b as one vdpbf16ps half-step (Intel SDM: "FP32 FMA with DAZ in, FTZ out and RNE
// rounding"). The bf16 product is exact in double and the sum of two values of at most 24
// significant bits rounds correctly through double (53 >= 2 * 24 + 2), so only the FTZ needs
// care: x86 detects tininess after rounding to 24 bits with an unbounded exponent, so a sum just
// below 2^-126 that rounds up to it survives, as the scaled rounding below reproduces.
inline float dpbf16_add(float acc, float a, float b) {
  const double d = static_cast<double>(acc) + static_cast<double>(a) * static_cast<double>(b);
  if (!(std::fabs(d) < 0x1p-126)) return static_cast<float>(d);  // normal, infinite or NaN
  const float scaled = static_cast<float>(d * 0x1p64);             // exact scaling, then 24-bit rounding
  return std::copysign(std::fabs(scaled) >= 0x1p-62f ? 0x1p-126f : 0.0f, static_cast<float>(d));
}

// y[i][j] = the 16-lane dot product of xb's row i and w's row j in vdpbf16ps order (kernels.hpp):
// lane l takes columns 32b + 2l + 1, then 32b + 2l, for each block b; then matmul's tree.
inline float dot_bf16(const uint16_t* xb, const uint16_t* w, int64_t cols) {
  float acc[16] = {};
  const int64_t kp = bf16_padded_cols(cols);
  for (int64_t k = 0; k < kp; k += 32)
    for (int l = 0; l < 16; ++l) {
      const int64_t odd = k + 2 * l + 1, even = k + 2 * l;
      // The padded tail: x is zero there and w reads as zero (the AVX-512 kernel masks the load).
      acc[l] = dpbf16_add(acc[l], bf16_daz(xb[odd]), odd < cols ? bf16_daz(w[odd]) : 0.0f);
      acc[l] = dpbf16_add(acc[l], bf16_daz(xb[even]), even < cols ? bf16_daz(w[even]) : 0.0f);
    }
  for (int half = 8; half > 0; half /= 2)
    for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
  return acc[0];
}

struct matmul_bf16_backend {
  const char* name;
  // Rows of w per work unit for n activation rows (threads take whole units).
  int64_t (*unit_rows)(int64_t n);
  // y[i][j] for i < n, j0 <= j < j1 (y has row stride w.rows); xb: [n, bf16_padded_cols(w.cols)].
  // scratch: the calling thread's scratch_elems(n, w.cols) elements, 64-byte aligned (null when the
  // back-end asks for none).
  void (*run)(const uint16_t* xb, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y,
              uint16_t* scratch);
  // The back-end's own activation layout, when it has one (AMX: 1 KB tiles of 16 rows, as rows or
  // transposed into column pairs, by n). Then xb holds xb_elems(n, cols) elements, written by pack(x, n, cols, xb, g) for
  // each group g of pack_rows activation rows (groups are independent: the team splits them), and
  // run() reads that layout. Without one, xb is the rows of bf16_padded_cols above.
  int64_t pack_rows = 1;
  size_t (*xb_elems)(int64_t n, int64_t cols) = nullptr;
  void (*pack)(const float* x, int64_t n, int64_t cols, uint16_t* xb, int64_t group) = nullptr;
  // bf16 elements of per-thread scratch run() needs for n rows (AMX: decode's padded weight block,
  // or prefill's unit of weights paired into tiles), as matmul_backend::scratch_floats; null: none.
  size_t (*scratch_elems)(int64_t n, int64_t cols) = nullptr;
};

// vdpbf16ps itself; callable only where the CPU has AVX512_BF16 (matmul.cpp checks).
const matmul_bf16_backend& matmul_bf16_backend_avx512();
// Intel AMX (TDPBF16PS on 16 x 32 tiles) where the CPU has AMX-BF16 and the kernel grants the tile
// state (amx_usable()). Not the vdpbf16ps bits: the tile unit sums its products its own way, so
// this back-end is checked against float64 within a bound, and for batch and thread invariance.
const matmul_bf16_backend& matmul_bf16_backend_amx();
// The f32 compute mode of BF16 weights on the same tiles (kernels.hpp, "f32 on AMX"): each x split
// exactly into three bf16 parts (hi + mid + lo = x), the three products of a 32-column block added
// in that order into one fp32 accumulator. Exact products, the tile unit's sums: fp32 accuracy,
// its own bits (not the FMA contract of matmul_backend.hpp), batch and thread invariant.
const matmul_bf16_backend& matmul_f32_backend_amx();
// True when the CPU has AMX-TILE and AMX-BF16 and Linux let this process use the tile registers
// (arch_prctl ARCH_REQ_XCOMP_PERM, asked for once on the first call).
bool amx_usable();
// Loads the tile configuration the AMX back-end uses (8 tiles of 16 rows x 64 bytes) on the calling
// thread; only where amx_usable(). The machine probe uses it too, so both run the same tiles.
void configure_amx_tiles();
// dot_bf16 per output: any CPU, slow (the fallback where AVX512_BF16 is missing or TROUPE_ISA
// asks for a lower ISA; results are the same bits).
const matmul_bf16_backend& matmul_bf16_backend_portable();

}  // namespace troupe::kernels::cpu
