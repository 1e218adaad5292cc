// Activation rounding of the W8A8 block-FP8 GEMM (kernels/cuda/gemm.hpp, as vLLM and DeepSeek-V3
// quantize): per token and per 128-column group, sa = max|x| / 448 (an IEEE float32 division) and
// code = e4m3(x / sa), round to nearest even, saturating; an all-zero group has sa = 0 and zero
// codes. One definition for the device kernel's host oracle (kernels/cuda/fp8_reference.hpp) and the
// CPU engine's emulation of the CUDA FP8 path (model_runner_options::fp8_activations).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/core/dtype.hpp"

namespace troupe::kernels {

inline constexpr int64_t kFp8ActGroup = 128;

inline int64_t fp8_act_groups(int64_t cols) { return (cols + kFp8ActGroup - 1) / kFp8ActGroup; }

// max |x| over one group of columns [c0, c1).
inline float fp8_act_amax(const float* x, int64_t c0, int64_t c1) {
  float amax = 0.0f;
  for (int64_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(x[c]));
  return amax;
}

// One token: codes [fp8_act_groups(cols) * 128] (zero past cols), scales [fp8_act_groups(cols)].
inline void quantize_fp8_act_row(const float* x, int64_t cols, uint8_t* codes, float* scales) {
  for (int64_t c0 = 0; c0 < cols; c0 += kFp8ActGroup) {
    const int64_t c1 = std::min(cols, c0 + kFp8ActGroup);
    const float amax = fp8_act_amax(x, c0, c1), s = amax / 448.0f;
    scales[c0 / kFp8ActGroup] = s;
    for (int64_t c = c0; c < c0 + kFp8ActGroup; ++c) codes[c] = c < c1 && amax > 0.0f ? f32_to_f8e4m3(x[c] / s) : 0;
  }
}

// The values the GEMM multiplies: y[i][c] = the e4m3 value of x[i][c]'s code times its group's
// scale (exact in float32: 4 significant bits times a float). x and y may be the same buffer.
inline void round_fp8_act_rows(const float* x, int64_t n, int64_t cols, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kFp8ActGroup) {
      const int64_t c1 = std::min(cols, c0 + kFp8ActGroup);
      const float amax = fp8_act_amax(xr, c0, c1), s = amax / 448.0f;
      for (int64_t c = c0; c < c1; ++c) yr[c] = amax > 0.0f ? f8e4m3_to_f32(f32_to_f8e4m3(xr[c] / s)) * s : 0.0f;
    }
  }
}

}  // namespace troupe::kernels
