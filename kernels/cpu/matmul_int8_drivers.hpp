// The drivers of the SIMD INT8 back-ends (AVX-512 with and without VNNI, AVX2), shared: decode
// and small batches stream tiles of weight rows a page apart, prefill passes blocks of activation
// rows over L2-resident panels. Include inside the back-end's target pragma, after defining in
// namespace troupe::kernels::cpu::{anonymous}:
//   tile<R, C>(a, i0, w, j, ka, kb, part, part_stride, first, pf, pf_rows, rs = 1): R activation rows x C
//     weight rows j, j + rs, ... over columns [ka, kb) (multiples of the block length, or kb = cols),
//     lane sums for (r, c) at part + r * part_stride + c * 16 (read unless first, written back); pf:
//     rows to prefetch (pf_rows of them, rs * cols bytes apart) at the columns the tile reads;
//   kDecodeCols[R]: the weight rows per decode tile of R = 1, 2, 3 activation rows;
//   kPanelTileRows (2 to 4) x kPanelTileCols: the prefill tile.
// The arithmetic is matmul_int8.hpp's, lane for lane, whatever the tile shapes.
//
// Decode (n <= 3): tiles of n activation rows x C weight rows, a page apart (see run_direct), stream
// every weight byte once and prefetch the next tile's rows as they go (0.6B-shaped model, AVX-512:
// 75% of the 2 MB-page read ceiling per token, attention and norms included; 65% with adjacent rows).
// Prefill: panels of 32 weight rows stay in L2 while blocks of 64 activation rows pass over them
// in 512-column slices; per-row partial lane sums carry across slices in the scratch buffer.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t panel_rows = 32;
constexpr int64_t block_n = 64;
constexpr int64_t slice_cols = 512;  // a multiple of every INT8 block length (matmul_int8.hpp)

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
  for (; c + kPanelTileCols <= nc; c += kPanelTileCols)
    tile<R, kPanelTileCols>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
  for (; c < nc; ++c) tile<R, 1>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
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
        for (int64_t i = ic; i < ie; i += kPanelTileRows) {
          float* part = scratch + (i - ic) * panel_rows * 16;
          static_assert(kPanelTileRows >= 2 && kPanelTileRows <= 4);
          switch (std::min<int64_t>(kPanelTileRows, ie - i)) {
            case 4: if constexpr (kPanelTileRows == 4) panel_rows_tiles<4>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 3: if constexpr (kPanelTileRows >= 3) panel_rows_tiles<3>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
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
      case 1: run_direct<1, kDecodeCols[1]>(a, w, j0, j1, y, pf0, pf1, i); break;
      case 2: run_direct<2, kDecodeCols[2]>(a, w, j0, j1, y, pf0, pf1, i); break;
      default: run_direct<3, kDecodeCols[3]>(a, w, j0, j1, y, pf0, pf1, i); break;
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
