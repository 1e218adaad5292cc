// Body of the AVX-512 INT8 back-ends, included twice under different target pragmas: once with
// AVX512-VNNI (vpdpwssd), once without (vpmaddwd + vpaddd, the same exact int32 sums). Keeping the
// two in separate units stops GCC from fusing madd+add into vpdpwssd in the variant for CPUs
// without VNNI. The arithmetic is matmul_int8.hpp's, lane for lane.
//
// The drivers (decode, small batches, prefill) are matmul_int8_drivers.hpp's; this is the tile.
// Requires: TROUPE_INT8_DP(acc, a, b) = acc + pairwise int16 products, and the target pragma.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int kDecodeCols[4] = {0, 8, 4, 2};  // 24 or fewer of the 32 zmm as lane sums
constexpr int kPanelTileRows = 4, kPanelTileCols = 2;

// R activation rows x C weight rows j, j + rs, ..., j + (C - 1) rs over columns [ka, kb) (multiples
// of the block length, or kb = cols). acc for (r, c) lives at part + r * part_stride + c * 16 (read
// unless first, written back). pf: base of rows to prefetch (pf_rows rows, rs * cols bytes apart)
// at the columns this tile reads.
template <int R, int C>
void tile(const quant_activations& a, int64_t i0, const weight_ref& w, int64_t j, int64_t ka, int64_t kb,
          float* part, int64_t part_stride, bool first, const int8_t* pf, int pf_rows, int64_t rs = 1) {
  const int64_t cols = w.cols, block = int8_block_cols(w), sc_cols = w.scale_cols(), step = rs * cols;
  const int64_t group = w.group_cols >= cols ? std::numeric_limits<int64_t>::max() : w.group_cols;
  const auto* q = static_cast<const int8_t*>(w.data) + j * cols;
  __m512 acc[R * C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r * C + c] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + r * part_stride + c * 16);
  const __m512 two15 = _mm512_set1_ps(32768.0f);
  for (int64_t k0 = ka; k0 < kb; k0 += block) {
    const int64_t k1 = std::min(k0 + block, cols);
    __m512i hs[R * C], ls[R * C];
#pragma GCC unroll 16
    for (int i = 0; i < R * C; ++i) hs[i] = ls[i] = _mm512_setzero_si512();
    for (int64_t k = k0; k < k1; k += 32) {
      if (pf && (k & 63) == 0)
        for (int p = 0; p < pf_rows; ++p) _mm_prefetch(reinterpret_cast<const char*>(pf + p * step + k), _MM_HINT_T0);
      __m512i xh[R], xl[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        xh[r] = _mm512_load_si512(a.hi + (i0 + r) * a.stride + k);
        xl[r] = _mm512_load_si512(a.lo + (i0 + r) * a.stride + k);
      }
      const bool full = k + 32 <= cols;
      const __mmask32 m = full ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << (cols - k)) - 1);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256i raw = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c * step + k))
                                 : _mm256_maskz_loadu_epi8(m, q + c * step + k);
        const __m512i wv = _mm512_cvtepi8_epi16(raw);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          hs[r * C + c] = TROUPE_INT8_DP(hs[r * C + c], xh[r], wv);
          ls[r * C + c] = TROUPE_INT8_DP(ls[r * C + c], xl[r], wv);
        }
      }
    }
    const int64_t g = k0 / group;
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 s = _mm512_set1_ps(w.scales[(j + c * rs) * sc_cols + g]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hs[r * C + c]), two15, _mm512_cvtepi32_ps(ls[r * C + c]));
        acc[r * C + c] = _mm512_fmadd_ps(v, s, acc[r * C + c]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_store_ps(part + r * part_stride + c * 16, acc[r * C + c]);
}

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/matmul_int8_drivers.hpp"
