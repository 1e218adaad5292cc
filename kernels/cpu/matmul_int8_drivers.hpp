// The drivers of the SIMD INT8 back-ends (AVX-512 with and without VNNI), shared: decode
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

#include "kernels/cpu/matmul_quant_panels.hpp"

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

// Prefill: see the file comment.
void run_packed(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  run_panels(a, w, j0, j1, y, scratch, slice_cols,
             [&a](const float* lanes, int64_t i) { return finish(lanes, a.exp[i]); });
}

size_t scratch_floats(int64_t n, const weight_ref&) {
  return n <= int8_passes_max_n ? 0 : static_cast<size_t>(block_n * panel_rows * 16);
}

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
         int64_t pf0, int64_t pf1) {
  if (a.n > int8_passes_max_n) return run_packed(a, w, j0, j1, y, scratch);
  // Decode in one pass; small batches in one pass of the decode tiles per <= 3 rows. (Spreading the
  // rows evenly, 4 = 2 + 2 as matmul_avx2.cpp does, measured no faster with the fixed-arithmetic
  // AVX2 back-end this once had: batch 4 / 16 34.2 / 33.6 -> 33.2 / 32.0 tokens/s, one run each.)
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
