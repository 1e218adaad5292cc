#include "runtime/core/dtype.hpp"

#include <cmath>

namespace troupe {

std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::f32: return "F32";
    case dtype::f16: return "F16";
    case dtype::bf16: return "BF16";
    case dtype::i8: return "I8";
    case dtype::f8_e4m3: return "F8_E4M3";
    case dtype::i32: return "I32";
    case dtype::i64: return "I64";
    case dtype::u8: return "U8";
  }
  return "?";
}

std::optional<dtype> dtype_from_safetensors(std::string_view n) noexcept {
  if (n == "F32") return dtype::f32;
  if (n == "F16") return dtype::f16;
  if (n == "BF16") return dtype::bf16;
  if (n == "I8") return dtype::i8;
  if (n == "F8_E4M3") return dtype::f8_e4m3;
  if (n == "I32") return dtype::i32;
  if (n == "I64") return dtype::i64;
  if (n == "U8") return dtype::u8;
  return std::nullopt;
}

size_t dtype_size(dtype t) noexcept {
  switch (t) {
    case dtype::f32: case dtype::i32: return 4;
    case dtype::f16: case dtype::bf16: return 2;
    case dtype::i8: case dtype::u8: case dtype::f8_e4m3: return 1;
    case dtype::i64: return 8;
  }
  return 0;
}

float f16_to_f32(uint16_t h) noexcept {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exact in float32
      float f = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&bits, &f, sizeof bits);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t f32_to_f16(float f) noexcept {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in f16: round via float arithmetic
    float a;
    std::memcpy(&a, &absx, sizeof a);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (absx >> 13));
}

}  // namespace troupe
