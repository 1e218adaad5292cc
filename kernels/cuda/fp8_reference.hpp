// The host reproduction of kernels/cuda/gemm.hpp's FP8 block GEMM arithmetic: the oracle of
// tests/kernels/cuda and bench/cuda. Activation quantization is reproduced bit for bit (IEEE
// division, round-to-nearest-even saturating e4m3); the products are summed in float64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/fp8_activations.hpp"
#include "runtime/core/dtype.hpp"

namespace troupe::kernels::cuda::reference {

inline constexpr int64_t kBlock = kFp8ActGroup;

inline int64_t col_blocks(int64_t cols) { return fp8_act_groups(cols); }

// One token: codes [col_blocks * 128] (zero past cols), scales [col_blocks].
inline void quantize_row(const float* x, int64_t cols, uint8_t* codes, float* scales) {
  quantize_fp8_act_row(x, cols, codes, scales);
}

struct quantized_activations {
  int64_t n = 0, cols = 0, padded = 0, blocks = 0;
  std::vector<uint8_t> codes;  // [n, padded]
  std::vector<float> scales;   // [n, blocks]
};

inline quantized_activations quantize(const float* x, int64_t n, int64_t cols) {
  quantized_activations q;
  q.n = n, q.cols = cols, q.blocks = col_blocks(cols), q.padded = q.blocks * kBlock;
  q.codes.assign(static_cast<size_t>(n * q.padded), 0);
  q.scales.assign(static_cast<size_t>(n * q.blocks), 0.0f);
  for (int64_t i = 0; i < n; ++i) quantize_row(x + i * cols, cols, &q.codes[i * q.padded], &q.scales[i * q.blocks]);
  return q;
}

// y[i][r] = sum_c (a[i][c] * sa[i][c / 128]) * (w[r][c] * sw[r / 128][c / 128]) in float64, and
// l1[i][r] = the same sum of absolute values (the scale of any rounding error in the kernel).
inline void matmul(const quantized_activations& q, const uint8_t* w_codes, const float* w_scales, int64_t rows,
                   std::vector<double>& y, std::vector<double>& l1) {
  const int64_t n = q.n, cols = q.cols, kbs = q.blocks;
  y.assign(static_cast<size_t>(n * rows), 0.0);
  l1.assign(static_cast<size_t>(n * rows), 0.0);
  std::vector<double> table(256);
  for (int c = 0; c < 256; ++c) table[c] = f8e4m3_to_f32(static_cast<uint8_t>(c));
  std::vector<double> a_deq(static_cast<size_t>(n * cols));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c)
      a_deq[i * cols + c] = table[q.codes[i * q.padded + c]] * static_cast<double>(q.scales[i * kbs + c / kBlock]);
  // Rows are independent: OpenMP (where the includer compiles with it) only splits the work.
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> wv(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c)
      wv[c] = table[w_codes[r * cols + c]] * static_cast<double>(w_scales[(r / kBlock) * kbs + c / kBlock]);
    for (int64_t i = 0; i < n; ++i) {
      const double* a = &a_deq[i * cols];
      double s = 0.0, m = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        s += a[c] * wv[c];
        m += std::fabs(a[c] * wv[c]);
      }
      y[i * rows + r] = s;
      l1[i * rows + r] = m;
    }
  }
}

}  // namespace troupe::kernels::cuda::reference
