// One (token, kv head) row of a quantized KV pool: symmetric codes with one float32 scale,
// max|row| / 127 for INT8 and / 448 for FP8 E4M3. Scales per token (and head), not per block:
// a block filled a token at a time would otherwise re-round earlier tokens, and its values
// would depend on how the prompt was chunked (docs/quantization.md).
#pragma once

#include <algorithm>
#include <bit>
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

// f8e4m3_to_f32 from the code's bits, as masks and shifts that GCC vectorises (a table lookup per
// element does not: it was 2.6x slower per element on AVX2, and held the FP8 cache's decode at a
// long context ~25% below the INT8 one). Exponent and mantissa move to float32's places with the
// bias raised by 120 (normals); exponent 0 is m * 2^-9 (subnormals, and zero); S.1111.111 is NaN.
// Every code gives the reference's bits (tests/kernels/quant/kv_quant_test.cpp).
inline float f8e4m3_bits_to_f32(uint32_t code) {
  const uint32_t mag = code & 0x7fu;
  const uint32_t is_nan = 0u - static_cast<uint32_t>(mag == 0x7fu), is_sub = 0u - static_cast<uint32_t>(mag < 8u);
  const uint32_t normal = (mag << 20) + (120u << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mag)) * 0x1p-9f);
  const uint32_t value = (sub & is_sub) | (normal & ~is_sub) | ((code & 0x80u) << 24);
  return std::bit_cast<float>((value & ~is_nan) | (0x7fc00000u & is_nan));  // nanf(""), unsigned, as the reference
}

// value = code * scale. Inlined into attention (ops.cpp), where it vectorises.
inline void dequantize_kv_row(const uint8_t* codes, float scale, int64_t n, dtype type, float* out) {
  if (type == dtype::i8) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f8e4m3_bits_to_f32(codes[i]) * scale;
  }
}

}  // namespace troupe::kernels::cpu
