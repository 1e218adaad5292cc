// AVX-512 FP8 (e4m3, block scales) back-end: codes widen exactly in registers through f16 bits
// (sign-extend to 16 bits, shift left 7, clear bit 14: an f16 equal to value * 2^-8, subnormals
// included; vcvtph2ps is exact), then fp32 FMAs per group and one fma with the block scale
// (matmul_int8.hpp). Never a full-precision copy of the weights. The drivers (streamed tiles for
// decode, L2 panels in column slices for prefill) are matmul_fp8_drivers.hpp's.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_int8.hpp"

// GCC 12 warns inside its own AVX-512 headers (_mm512_setzero_ps & co., GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {

constexpr int kDecodeCols[4] = {0, 8, 4, 3};
constexpr int kPanelTileRows = 4, kPanelTileCols = 4;

inline __m512 widen16(const uint8_t* p, __mmask16 m, bool full) {
  const __m128i raw = full ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(m, p);
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7), _mm256_set1_epi16(static_cast<short>(0xbfff)));
  return _mm512_cvtph_ps(h);
}

// R activation rows x C weight rows over columns [ka, kb) (group-aligned, or kb = cols); acc for
// (r, c) at part + r * part_stride + c * 16. pf: rows to prefetch alongside (decode).
template <int R, int C>
void tile(const quant_activations& a, int64_t i0, const weight_ref& w, int64_t j, int64_t ka, int64_t kb, float* part,
          int64_t part_stride, bool first, const uint8_t* pf, int pf_rows) {
  const int64_t cols = w.cols, sc_cols = w.scale_cols();
  const int64_t group = std::min<int64_t>(w.group_cols, cols);
  const auto* q = static_cast<const uint8_t*>(w.data) + j * cols;
  __m512 acc[R * C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r * C + c] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + r * part_stride + c * 16);
  for (int64_t g0 = ka; g0 < kb; g0 += group) {
    const int64_t g1 = std::min(g0 + group, cols);
    __m512 p[R * C];
#pragma GCC unroll 16
    for (int i = 0; i < R * C; ++i) p[i] = _mm512_setzero_ps();
    for (int64_t k = g0; k < g1; k += 16) {
      if (pf && (k & 63) == 0)
        for (int t = 0; t < pf_rows; ++t) _mm_prefetch(reinterpret_cast<const char*>(pf + t * cols + k), _MM_HINT_T0);
      __m512 xv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) xv[r] = _mm512_load_ps(a.x + (i0 + r) * a.stride + k);
      const bool full = k + 16 <= cols;
      const __mmask16 m = full ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (cols - k)) - 1);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 wv = widen16(q + c * cols + k, m, full);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) p[r * C + c] = _mm512_fmadd_ps(xv[r], wv, p[r * C + c]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const float s = w.scales[((j + c) / w.group_rows) * sc_cols + g0 / w.group_cols] * 256.0f;
      const __m512 sv = _mm512_set1_ps(s);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(p[r * C + c], sv, acc[r * C + c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_store_ps(part + r * part_stride + c * 16, acc[r * C + c]);
}

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/matmul_fp8_drivers.hpp"

#pragma GCC pop_options

namespace troupe::kernels::cpu {

const quant_backend& fp8_backend_avx512() {
  static const quant_backend b{"avx512", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
