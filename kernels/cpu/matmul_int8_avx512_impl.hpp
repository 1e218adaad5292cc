// Body of the AVX-512 INT8 back-ends, included twice under different target pragmas: once with
// AVX512-VNNI (vpdpwssd), once without (vpmaddwd + vpaddd, the same exact int32 sums). Keeping the
// two in separate units stops GCC from fusing madd+add into vpdpwssd in the variant for CPUs
// without VNNI. The arithmetic is matmul_int8.hpp's, lane for lane.
//
// Decode (n <= 3): tiles of n activation rows x C weight rows, a page apart (see run_direct), stream
// every weight byte once and prefetch the next tile's rows as they go (0.6B-shaped model: 75% of
// the 2 MB-page read ceiling per token, attention and norms included; 65% with adjacent rows).
// Prefill: panels of 32 weight rows stay in L2 while blocks of 64 activation rows pass over them
// in 512-column slices; per-row partial lane sums carry across slices in the scratch buffer.
// Requires: TROUPE_INT8_DP(acc, a, b) = acc + pairwise int16 products, and the target pragma.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t panel_rows = 32;
constexpr int64_t block_n = 64;
constexpr int64_t slice_cols = 512;  // a multiple of every INT8 block length (matmul_int8.hpp)

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

inline float finish(const float* lanes, int32_t e) {
  if (e == kNonFinite) return std::numeric_limits<float>::quiet_NaN();
  return scale_pow2(tree16(lanes), -e);
}

// Decode: R = n activation rows, tiles of C weight rows, every weight byte read once. A tile's rows
// lie a page (4 KB) apart where rows are shorter than a page (rows j + c * S, S = 4096 / row bytes),
// and the S tiles of a group of C * S rows run in order s = 0 .. S-1: each page is then read front
// to back by one stream, which the L2 streamer (one stream per 4 KB page) follows; C adjacent rows
// would put up to S streams in one page. Rows of a unit that fill no whole group are tiled plainly.
template <int R, int C>
void run_direct(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, int64_t pf0,
                int64_t pf1, int64_t i0 = 0) {
  y += i0 * w.rows;  // activation rows i0 .. i0 + R - 1
  alignas(64) float part[R * C * 16];
  const auto* codes = static_cast<const int8_t*>(w.data);
  const int64_t S = w.cols < 4096 ? 4096 / w.cols : 1, span = C * S;
  int64_t j = j0;
  for (; S > 1 && j + span <= j1; j += span)
    for (int64_t s = 0; s < S; ++s) {
      // Prefetch the next tile of this group, else of the next group, else the next unit's start.
      const int64_t next = s + 1 < S ? j + s + 1 : j + span + span <= j1 ? j + span : pf0;
      const bool own = s + 1 < S || j + span + span <= j1;
      const int rows = own ? C : static_cast<int>(std::min<int64_t>(C, (pf1 - pf0) / S));
      tile<R, C>(a, i0, w, j + s, 0, w.cols, part, C * 16, true, rows > 0 ? codes + next * w.cols : nullptr, rows, S);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[r * w.rows + j + s + c * S] = finish(part + (r * C + c) * 16, a.exp[i0 + r]);
    }
  for (; j + C <= j1; j += C) {
    // Prefetch the next tile of this unit, else the start of the unit this thread takes next.
    const int64_t next = j + C < j1 ? j + C : pf0;
    const int rows = static_cast<int>(std::min<int64_t>(C, (j + C < j1 ? j1 : pf1) - next));
    tile<R, C>(a, i0, w, j, 0, w.cols, part, C * 16, true, rows > 0 ? codes + next * w.cols : nullptr, rows);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) y[r * w.rows + j + c] = finish(part + (r * C + c) * 16, a.exp[i0 + r]);
  }
  for (; j < j1; ++j) {
    tile<R, 1>(a, i0, w, j, 0, w.cols, part, 16, true, nullptr, 0);
    for (int r = 0; r < R; ++r) y[r * w.rows + j] = finish(part + r * 16, a.exp[i0 + r]);
  }
}

template <int R>
void panel_rows_tiles(const quant_activations& a, int64_t i, const weight_ref& w, int64_t jc, int64_t nc, int64_t ka,
                      int64_t kb, float* part, bool first) {
  constexpr int64_t stride = panel_rows * 16;
  int64_t c = 0;
  for (; c + 2 <= nc; c += 2) tile<R, 2>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
  if (c < nc) tile<R, 1>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
}

// Prefill: see the file comment. scratch: block_n x panel_rows x 16 floats of partial lane sums.
void run_packed(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const int64_t n = a.n, cols = w.cols;
  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min(panel_rows, j1 - jc);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t ka = 0; ka < cols; ka += slice_cols) {
        const int64_t kb = std::min(cols, ka + slice_cols);
        for (int64_t i = ic; i < ie; i += 4) {
          float* part = scratch + (i - ic) * panel_rows * 16;
          switch (std::min<int64_t>(4, ie - i)) {
            case 4: panel_rows_tiles<4>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 3: panel_rows_tiles<3>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 2: panel_rows_tiles<2>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            default: panel_rows_tiles<1>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
          }
        }
      }
      for (int64_t i = ic; i < ie; ++i)
        for (int64_t c = 0; c < nc; ++c)
          y[i * w.rows + jc + c] = finish(scratch + ((i - ic) * panel_rows + c) * 16, a.exp[i]);
    }
  }
}

size_t scratch_floats(int64_t n, const weight_ref&) {
  return n <= int8_passes_max_n ? 0 : static_cast<size_t>(block_n * panel_rows * 16);
}

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
         int64_t pf0, int64_t pf1) {
  if (a.n > int8_passes_max_n) return run_packed(a, w, j0, j1, y, scratch);
  // Decode in one pass; small batches in one pass of the decode tiles per <= 3 rows.
  for (int64_t i = 0; i < a.n; i += 3) {
    switch (std::min<int64_t>(3, a.n - i)) {
      case 1: run_direct<1, 8>(a, w, j0, j1, y, pf0, pf1, i); break;
      case 2: run_direct<2, 4>(a, w, j0, j1, y, pf0, pf1, i); break;
      default: run_direct<3, 2>(a, w, j0, j1, y, pf0, pf1, i); break;
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
