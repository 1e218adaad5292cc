// The per-instruction-set halves of kernels::matmul. matmul.cpp validates, picks a back-end once,
// and hands each thread whole units of weight rows; a back-end computes y[:, j0:j1] for one unit.
//
// Every back-end computes y[i][j] the same way (the "16-lane dot product"):
//   lane l (0..15) accumulates, in increasing k, acc[l] = fma(x[i][k], w[j][k], acc[l]) for every
//   k = 16b + l < cols (acc starts at +0; the last partial block behaves as if zero-padded), then
//   s[l] = acc[l] + acc[l+8] (l < 8); s[l] += s[l+4] (l < 4); s[l] += s[l+2] (l < 2); y = s[0] + s[1].
// So a result depends only on x's row, w's row and cols: not on n, the tile it sat in, the unit
// split or the thread count, and all back-ends agree bit for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"

namespace troupe::kernels::cpu {

struct matmul_backend {
  const char* name;
  // Rows of w per work unit for a call with n activation rows (threads take whole units).
  int64_t (*unit_rows)(int64_t n, const weight_ref& w);
  // Floats of 64-byte-aligned per-thread scratch run() needs (packed weight panel).
  size_t (*scratch_floats)(int64_t n, const weight_ref& w);
  // y[i][j] for i < n, j0 <= j < j1 (y has row stride w.rows); w.type is f32, bf16 or f16.
  void (*run)(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y,
              float* scratch);
};

// Small batches that a back-end runs as passes of its decode tiles (a few activation rows a pass)
// take units of at most 512 KB of weight rows: the first pass streams a unit from memory, the later
// ones find it in L2. (Defined here, before any back-end's target pragma: baseline code in every
// unit that includes it.)
inline int64_t pass_unit_rows(const weight_ref& w) {
  const int64_t row_bytes = std::max<int64_t>(1, w.row_bytes());
  return std::clamp<int64_t>((int64_t{512} << 10) / row_bytes / 16 * 16, 16, 256);
}

// Decode tiles of weight rows shorter than a 4 KB page take rows a page apart: with S rows in a
// page, tile s of a group of S tiles takes rows j + s + c * S and the group's tiles run in order,
// so each page is read front to back by one stream that the L2 streamer (one stream per page)
// follows, where adjacent rows would put S streams in a page. Same bits: each output is its own
// row's dot product. S (1 for rows of a page or more):
inline int64_t rows_per_page(int64_t row_bytes) { return row_bytes < 4096 ? 4096 / row_bytes : 1; }

const matmul_backend& matmul_backend_avx512();
const matmul_backend& matmul_backend_avx2();
const matmul_backend& matmul_backend_generic();

// The back-ends this CPU can run, the portable one first and the one matmul() picks by default
// last (tests compare them all).
std::vector<const matmul_backend*> runnable_matmul_backends();

}  // namespace troupe::kernels::cpu
