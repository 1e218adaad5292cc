#include "runtime/core/dtype.hpp"

#include <algorithm>
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
    case dtype::u4: return "U4";
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
    case dtype::u4: return 0;
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

float f8e4m3_to_f32(uint8_t v) noexcept {
  const uint32_t exp = (v >> 3) & 0xf, mant = v & 7;
  if (exp == 15 && mant == 7) return std::nanf("");
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)  // subnormal: mant * 2^-9
                             : std::ldexp(static_cast<float>(8 + mant), static_cast<int>(exp) - 10);
  return (v & 0x80) ? -mag : mag;
}

uint8_t f32_to_f8e4m3(float f) noexcept {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (448 = 0x7e)
  // Quantum of a's binade: subnormals and the first normal binade share 2^-9.
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int q = std::max(e - 1 - 3, -9);
  // a / 2^q is exact; rounding it to an integer with nearbyint (ties to even) is the FP8 rounding.
  const float steps = std::nearbyint(std::ldexp(a, -q));
  const float r = std::ldexp(steps, q);
  if (r == 0.0f) return sign;
  int re = 0;
  const float m = std::frexp(r, &re);  // r = m * 2^re, m in [0.5, 1)
  if (re - 1 < -6) return sign | static_cast<uint8_t>(std::ldexp(r, 9));  // subnormal code
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(m, 4)) - 8;      // m * 16 in [8, 16)
  return sign | static_cast<uint8_t>(((re - 1 + 7) << 3) | mant);
}

}  // namespace troupe
