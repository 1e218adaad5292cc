// Element types of weights, activations and KV, with exact widening to float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace troupe {

// u4: 4-bit weight codes, two a byte (kernels::weight_ref documents the layout); never a
// safetensors dtype, and dtype_size() is 0 for it (a row's bytes: weight_ref::row_bytes()).
enum class dtype : uint8_t { f32, f16, bf16, i8, f8_e4m3, i32, i64, u8, u4 };

std::string_view to_string(dtype t) noexcept;
// Parses the safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::optional<dtype> dtype_from_safetensors(std::string_view name) noexcept;
size_t dtype_size(dtype t) noexcept;

// bf16 is the upper half of an IEEE float32: widening is a shift, exact.
inline float bf16_to_f32(uint16_t v) noexcept {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t v) noexcept;
uint16_t f32_to_f16(float f) noexcept;

// FP8 E4M3 ("e4m3fn", as in safetensors F8_E4M3 and OCP FP8): bias 7, no infinities, 0x7f and
// 0xff are NaN, largest finite 448. Widening is exact; narrowing rounds to nearest even and
// saturates to +-448 (NaN stays NaN), as torch's float8_e4m3fn conversion with clamping does.
float f8e4m3_to_f32(uint8_t v) noexcept;
uint8_t f32_to_f8e4m3(float f) noexcept;

}  // namespace troupe
