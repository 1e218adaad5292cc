// One (token, kv head) row of a quantized KV pool: symmetric codes with one float32 scale,
// max|row| / 127 for INT8 and / 448 for FP8 E4M3. Scales per token (and head), not per block:
// a block filled a token at a time would otherwise re-round earlier tokens, and its values
// would depend on how the prompt was chunked (docs/quantization.md).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "runtime/core/dtype.hpp"

namespace troupe::kernels::cpu {

inline float quantize_kv_row(const float* v, int64_t n, dtype type, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float scale = amax / (type == dtype::i8 ? 127.0f : 448.0f);
  if (!(scale > 0.0f) || !std::isfinite(scale)) {  // zeros (or a non-finite row: stored as zeros, scale NaN)
    std::fill(codes, codes + n, uint8_t{0});
    return scale == 0.0f ? 0.0f : NAN;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i] / scale;
    codes[i] = type == dtype::i8 ? static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(x), -127.0f, 127.0f)))
                                 : f32_to_f8e4m3(x);
  }
  return scale;
}

// Every E4M3 code's f8e4m3_to_f32, looked up per element: selects on the code's bits measured
// 2x slower per FP8-cache decode token at context 1500 than this table (GCC 12, -O3). Built at
// start-up, not a function-local static: the guard on every row cost ~20% there.
inline const std::array<float, 256> kFp8KvValues = [] {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = f8e4m3_to_f32(static_cast<uint8_t>(c));
  return t;
}();

// value = code * scale. Inlined into attention (ops.cpp), where it vectorises.
inline void dequantize_kv_row(const uint8_t* codes, float scale, int64_t n, dtype type, float* out) {
  if (type == dtype::i8) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
  } else {
    const float* fp8 = kFp8KvValues.data();
    for (int64_t i = 0; i < n; ++i) out[i] = fp8[codes[i]] * scale;
  }
}

}  // namespace troupe::kernels::cpu
