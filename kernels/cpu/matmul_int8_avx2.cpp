// AVX2 INT8 back-end (CPUs without AVX-512, e.g. AMD Zen 2/3): matmul_int8.hpp's arithmetic with
// vpmaddwd + vpaddd on ymm. The 16 lanes of a block's integer sums live in two ymm: columns k..k+15
// of each 32 feed lanes 0-7 (vpmaddwd adds the pairs 2l, 2l+1), columns k+16..k+31 lanes 8-15, as
// vpdpwssd on a zmm would; so the sums, and every result, match the other back-ends bit for bit.
// With 16 ymm a tile holds at most 3 (activation row, weight row) pairs (4 ymm of sums each); the
// activations are memory operands (L1), the two widened weight halves stay in registers. The
// float lane sums wait in `part` between blocks (one update per block of up to 512 columns).
// Standard headers come before the target pragma so no AVX2 code leaks into shared inline
// functions; everything compiled under the pragma has internal linkage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {

constexpr int kDecodeCols[4] = {0, 2, 1, 1};  // 4 R C sum registers + 4 R activations + 2 weights, no spills
constexpr int kPanelTileRows = 2, kPanelTileCols = 1;

// 32 codes widened to int16, columns 0-15 and 16-31 (full: all 32 exist; else the first `count`,
// zero-padded: the activations' pad columns are zero, so the padding adds nothing).
inline __attribute__((always_inline)) void load_codes(const int8_t* p, int64_t count, __m256i& w0, __m256i& w1) {
  if (count >= 32) {
    w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    return;
  }
  alignas(32) int8_t buf[32] = {};
  std::memcpy(buf, p, static_cast<size_t>(count));
  w0 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  w1 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(buf + 16)));
}

inline __m256i dp(__m256i acc, const int16_t* x, __m256i w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(x)), w));
}

// Weight row c's 32 widened codes into the lane sums of every activation row at column k.
template <int R, int C>
inline __attribute__((always_inline)) void accumulate(const quant_activations& a, int64_t i0, int64_t k, int c,
                                                      __m256i w0, __m256i w1, __m256i (*hs)[2], __m256i (*ls)[2]) {
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) {
    const int16_t* xh = a.hi + (i0 + r) * a.stride + k;
    const int16_t* xl = a.lo + (i0 + r) * a.stride + k;
    hs[r * C + c][0] = dp(hs[r * C + c][0], xh, w0);
    hs[r * C + c][1] = dp(hs[r * C + c][1], xh + 16, w1);
    ls[r * C + c][0] = dp(ls[r * C + c][0], xl, w0);
    ls[r * C + c][1] = dp(ls[r * C + c][1], xl + 16, w1);
  }
}

// The tile contract of matmul_int8_drivers.hpp.
template <int R, int C>
void tile(const quant_activations& a, int64_t i0, const weight_ref& w, int64_t j, int64_t ka, int64_t kb,
          float* part, int64_t part_stride, bool first, const int8_t* pf, int pf_rows, int64_t rs = 1) {
  static_assert(R * C <= 3, "16 ymm: 4 per lane-sum pair, 2 weights, 1 temporary");
  const int64_t cols = w.cols, block = int8_block_cols(w), sc_cols = w.scale_cols(), step = rs * cols;
  const int64_t group = w.group_cols >= cols ? std::numeric_limits<int64_t>::max() : w.group_cols;
  const auto* q = static_cast<const int8_t*>(w.data) + j * cols;
  if (first)
    for (int r = 0; r < R; ++r) std::memset(part + r * part_stride, 0, static_cast<size_t>(C) * 16 * sizeof(float));
  const __m256 two15 = _mm256_set1_ps(32768.0f);
  for (int64_t k0 = ka; k0 < kb; k0 += block) {
    const int64_t k1 = std::min(k0 + block, cols);
    __m256i hs[R * C][2], ls[R * C][2];
#pragma GCC unroll 3
    for (int i = 0; i < R * C; ++i) hs[i][0] = hs[i][1] = ls[i][0] = ls[i][1] = _mm256_setzero_si256();
    // Whole 32-column steps, then the row's ragged end (a copy: no call inside the hot loop,
    // which would push every sum register to the stack around it).
    const int64_t kf = k1 - (k1 - k0) % 32;
    for (int64_t k = k0; k < kf; k += 32) {
      if (pf && (k & 63) == 0)
        for (int p = 0; p < pf_rows; ++p) _mm_prefetch(reinterpret_cast<const char*>(pf + p * step + k), _MM_HINT_T0);
#pragma GCC unroll 3
      for (int c = 0; c < C; ++c) {
        __m256i w0, w1;
        load_codes(q + c * step + k, 32, w0, w1);
        accumulate<R, C>(a, i0, k, c, w0, w1, hs, ls);
      }
    }
    if (kf < k1)
#pragma GCC unroll 3
      for (int c = 0; c < C; ++c) {
        __m256i w0, w1;
        load_codes(q + c * step + kf, k1 - kf, w0, w1);
        accumulate<R, C>(a, i0, kf, c, w0, w1, hs, ls);
      }
    const int64_t g = k0 / group;
#pragma GCC unroll 3
    for (int c = 0; c < C; ++c) {
      const __m256 s = _mm256_set1_ps(w.scales[(j + c * rs) * sc_cols + g]);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r)
        for (int half = 0; half < 2; ++half) {
          float* acc = part + r * part_stride + c * 16 + half * 8;
          const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hs[r * C + c][half]), two15,
                                           _mm256_cvtepi32_ps(ls[r * C + c][half]));
          _mm256_storeu_ps(acc, _mm256_fmadd_ps(v, s, _mm256_loadu_ps(acc)));
        }
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/matmul_int8_drivers.hpp"

#pragma GCC pop_options

namespace troupe::kernels::cpu {

const quant_backend& int8_backend_avx2() {
  static const quant_backend b{"avx2", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
