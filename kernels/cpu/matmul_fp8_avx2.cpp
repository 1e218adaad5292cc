// AVX2 FP8 (e4m3, block scales) back-end for CPUs without AVX-512: the AVX-512 back-end's exact
// widening (sign-extend to 16 bits, shift left 7, clear bit 14: an f16 equal to value * 2^-8;
// F16C's vcvtph2ps is exact) and arithmetic, with the 16 lanes of each sum in two ymm (lanes 0-7,
// 8-15), so results match the other back-ends bit for bit (matmul_int8.hpp). Activations are
// memory operands (L1); a tile holds up to 6 (activation row, weight row) pairs of lane sums.
// Standard headers come before the target pragma so no AVX2 code leaks into shared inline
// functions; everything compiled under the pragma has internal linkage.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_int8.hpp"

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {

constexpr int kDecodeCols[4] = {0, 6, 3, 2};  // R x C <= 6 sum pairs (12 ymm) + 2 weights; x from L1
constexpr int kPanelTileRows = 3, kPanelTileCols = 2;

// 16 codes at p widened to fp32 (lanes 0-7 in lo, 8-15 in hi); past `count` zeros.
inline void widen16(const uint8_t* p, int64_t count, __m256& lo, __m256& hi) {
  __m128i raw;
  if (count >= 16) {
    raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint8_t buf[16] = {};
    std::memcpy(buf, p, static_cast<size_t>(count));
    raw = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
  }
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                     _mm256_set1_epi16(static_cast<short>(0xbfff)));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// The tile contract of matmul_fp8_drivers.hpp.
template <int R, int C>
void tile(const quant_activations& a, int64_t i0, const weight_ref& w, int64_t j, int64_t ka, int64_t kb, float* part,
          int64_t part_stride, bool first, const uint8_t* pf, int pf_rows) {
  static_assert(R * C <= 6, "16 ymm: 2 per lane-sum pair, 2 weights");
  const int64_t cols = w.cols, sc_cols = w.scale_cols();
  const int64_t group = std::min<int64_t>(w.group_cols, cols);
  const auto* q = static_cast<const uint8_t*>(w.data) + j * cols;
  if (first)
    for (int r = 0; r < R; ++r) std::memset(part + r * part_stride, 0, static_cast<size_t>(C) * 16 * sizeof(float));
  for (int64_t g0 = ka; g0 < kb; g0 += group) {
    const int64_t g1 = std::min(g0 + group, cols);
    __m256 p[R * C][2];
#pragma GCC unroll 6
    for (int i = 0; i < R * C; ++i) p[i][0] = p[i][1] = _mm256_setzero_ps();
    for (int64_t k = g0; k < g1; k += 16) {
      if (pf && (k & 63) == 0)
        for (int t = 0; t < pf_rows; ++t) _mm_prefetch(reinterpret_cast<const char*>(pf + t * cols + k), _MM_HINT_T0);
#pragma GCC unroll 6
      for (int c = 0; c < C; ++c) {
        __m256 wl, wh;
        widen16(q + c * cols + k, cols - k, wl, wh);
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) {
          const float* x = a.x + (i0 + r) * a.stride + k;
          p[r * C + c][0] = _mm256_fmadd_ps(_mm256_load_ps(x), wl, p[r * C + c][0]);
          p[r * C + c][1] = _mm256_fmadd_ps(_mm256_load_ps(x + 8), wh, p[r * C + c][1]);
        }
      }
    }
#pragma GCC unroll 6
    for (int c = 0; c < C; ++c) {
      const __m256 sv = _mm256_set1_ps(w.scales[((j + c) / w.group_rows) * sc_cols + g0 / w.group_cols] * 256.0f);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r)
        for (int half = 0; half < 2; ++half) {
          float* acc = part + r * part_stride + c * 16 + half * 8;
          _mm256_storeu_ps(acc, _mm256_fmadd_ps(p[r * C + c][half], sv, _mm256_loadu_ps(acc)));
        }
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/matmul_fp8_drivers.hpp"

#pragma GCC pop_options

namespace troupe::kernels::cpu {

const quant_backend& fp8_backend_avx2() {
  static const quant_backend b{"avx2", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
