// The drivers of the SIMD FP8 back-ends (AVX-512; once AVX2 too), shared: decode (n <= 3) streams tiles of
// weight rows and prefetches the next tile's; larger batches pass blocks of activation rows over
// L2-resident panels of 32 weight rows in column slices of whole groups. Include inside the
// back-end's target pragma, after defining in namespace troupe::kernels::cpu::{anonymous}:
//   tile<R, C>(a, i0, w, j, ka, kb, part, part_stride, first, pf, pf_rows): R activation rows x C
//     weight rows from j over columns [ka, kb) (group-aligned, or kb = cols), the 16 lane sums of
//     (r, c) at part + r * part_stride + c * 16 (read unless first, written back); pf: pf_rows rows
//     to prefetch at the columns the tile reads;
//   kDecodeCols[R]: weight rows per decode tile of R = 1, 2, 3 activation rows;
//   kPanelTileRows (3 or 4) x kPanelTileCols: the batched tile.
// The arithmetic is matmul_int8.hpp's, lane for lane, whatever the tile shapes.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

#include "kernels/cpu/matmul_quant_panels.hpp"

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

void run_packed(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  // Column slices of whole groups, about 512 wide, so a tile's x rows stay in L1.
  const int64_t group = std::min<int64_t>(w.group_cols, w.cols);
  const int64_t slice = std::max<int64_t>(1, 512 / group) * group;
  run_panels(a, w, j0, j1, y, scratch, slice, [](const float* lanes, int64_t) { return tree16(lanes); });
}

size_t scratch_floats(int64_t n, const weight_ref&) {
  return n <= 3 ? 0 : static_cast<size_t>(block_n * panel_rows * 16);
}

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
         int64_t pf0, int64_t pf1) {
  switch (a.n) {
    case 1: return run_direct<1, kDecodeCols[1]>(a, w, j0, j1, y, pf0, pf1);
    case 2: return run_direct<2, kDecodeCols[2]>(a, w, j0, j1, y, pf0, pf1);
    case 3: return run_direct<3, kDecodeCols[3]>(a, w, j0, j1, y, pf0, pf1);
    default: return run_packed(a, w, j0, j1, y, scratch);
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu
