// The prefill half of the SIMD INT8 and FP8 drivers (matmul_int8_drivers.hpp,
// matmul_fp8_drivers.hpp), which was twice the same code: panels of panel_rows weight rows stay in
// L2 while blocks of block_n activation rows pass over them in column slices; per-row partial lane
// sums carry across slices in the scratch buffer (block_n x panel_rows x 16 floats).
// Include inside namespace troupe::kernels::cpu::{anonymous}, after the back-end's tile<R, C>,
// kPanelTileRows (2 to 4) and kPanelTileCols (the drivers' comments give that contract), with
// <algorithm> and <cstdint> included before.
#pragma once

constexpr int64_t panel_rows = 32;
constexpr int64_t block_n = 64;

// Activation rows i .. i + R - 1 over the panel's nc weight rows from jc, columns [ka, kb).
template <int R>
void panel_rows_tiles(const quant_activations& a, int64_t i, const weight_ref& w, int64_t jc, int64_t nc, int64_t ka,
                      int64_t kb, float* part, bool first) {
  constexpr int64_t stride = panel_rows * 16;
  int64_t c = 0;
  for (; c + kPanelTileCols <= nc; c += kPanelTileCols)
    tile<R, kPanelTileCols>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
  for (; c < nc; ++c) tile<R, 1>(a, i, w, jc + c, ka, kb, part + c * 16, stride, first, nullptr, 0);
}

// y[:, j0:j1] in slices of `slice` columns (a multiple of the weights' group or block length);
// finish(lanes, i) turns activation row i's 16 lane sums into its output.
template <class Finish>
void run_panels(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch,
                int64_t slice, Finish finish) {
  const int64_t n = a.n, cols = w.cols;
  static_assert(kPanelTileRows >= 2 && kPanelTileRows <= 4);
  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min(panel_rows, j1 - jc);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t ka = 0; ka < cols; ka += slice) {
        const int64_t kb = std::min(cols, ka + slice);
        for (int64_t i = ic; i < ie; i += kPanelTileRows) {
          float* part = scratch + (i - ic) * panel_rows * 16;
          switch (std::min<int64_t>(kPanelTileRows, ie - i)) {
            case 4: if constexpr (kPanelTileRows == 4) panel_rows_tiles<4>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 3: if constexpr (kPanelTileRows >= 3) panel_rows_tiles<3>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            case 2: panel_rows_tiles<2>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
            default: panel_rows_tiles<1>(a, i, w, jc, nc, ka, kb, part, ka == 0); break;
          }
        }
      }
      for (int64_t i = ic; i < ie; ++i)
        for (int64_t c = 0; c < nc; ++c) y[i * w.rows + jc + c] = finish(scratch + ((i - ic) * panel_rows + c) * 16, i);
    }
  }
}
