// AVX-512 FP8 (e4m3, block scales) back-end: codes widen exactly in registers through f16 bits
// (sign-extend to 16 bits, shift left 7, clear bit 14: an f16 equal to value * 2^-8, subnormals
// included; vcvtph2ps is exact), then fp32 FMAs per group and one fma with the block scale
// (matmul_int8.hpp). Never a full-precision copy of the weights. Same tiling as the INT8 back-end:
// streamed tiles for decode, L2 panels in column slices for prefill.
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

constexpr int64_t panel_rows = 32;
constexpr int64_t block_n = 64;

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

template <int R, int C>
void run_direct(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, int64_t pf0,
                int64_t pf1) {
  alignas(64) float part[R * C * 16];
  const auto* codes = static_cast<const uint8_t*>(w.data);
  int64_t j = j0;
  for (; j + C <= j1; j += C) {
    const int64_t next = j + C < j1 ? j + C : pf0;
    const int rows = static_cast<int>(std::min<int64_t>(C, (j + C < j1 ? j1 : pf1) - next));
    tile<R, C>(a, 0, w, j, 0, w.cols, part, C * 16, true, rows > 0 ? codes + next * w.cols : nullptr, rows);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) y[r * w.rows + j + c] = tree16(part + (r * C + c) * 16);
  }
  for (; j < j1; ++j) {
    tile<R, 1>(a, 0, w, j, 0, w.cols, part, 16, true, nullptr, 0);
    for (int r = 0; r < R; ++r) y[r * w.rows + j] = tree16(part + r * 16);
  }
}

template <int R>
void panel_tiles(const quant_activations& a, int64_t i, const weight_ref& w, int64_t jc, int64_t nc, int64_t ka,
                 int64_t kb, float* part, bool first) {
  constexpr int64_t stride = panel_rows * 16;
  int64_t c = 0;
  for (; c + 4 <= nc; c += 4) tile<R, 4>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
  for (; c < nc; ++c) tile<R, 1>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
}

void run_packed(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const int64_t n = a.n, cols = w.cols;
  // Column slices of whole groups, about 512 wide, so a tile's x rows stay in L1.
  const int64_t group = std::min<int64_t>(w.group_cols, cols);
  const int64_t slice = std::max<int64_t>(1, 512 / group) * group;
  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min(panel_rows, j1 - jc);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t ka = 0; ka < cols; ka += slice) {
        const int64_t kb = std::min(cols, ka + slice);
        for (int64_t i = ic; i < ie; i += 4) {
          float* part = scratch + (i - ic) * panel_rows * 16;
          switch (std::min<int64_t>(4, ie - i)) {
            case 4: panel_tiles<4>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 3: panel_tiles<3>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 2: panel_tiles<2>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            default: panel_tiles<1>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
          }
        }
      }
      for (int64_t i = ic; i < ie; ++i)
        for (int64_t c = 0; c < nc; ++c) y[i * w.rows + jc + c] = tree16(scratch + ((i - ic) * panel_rows + c) * 16);
    }
  }
}

size_t scratch_floats(int64_t n, const weight_ref&) {
  return n <= 3 ? 0 : static_cast<size_t>(block_n * panel_rows * 16);
}

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
         int64_t pf0, int64_t pf1) {
  switch (a.n) {
    case 1: return run_direct<1, 8>(a, w, j0, j1, y, pf0, pf1);
    case 2: return run_direct<2, 4>(a, w, j0, j1, y, pf0, pf1);
    case 3: return run_direct<3, 3>(a, w, j0, j1, y, pf0, pf1);
    default: return run_packed(a, w, j0, j1, y, scratch);
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

const quant_backend& fp8_backend_avx512() {
  static const quant_backend b{"avx512", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
