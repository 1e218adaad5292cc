// Float math for the portable kernels (the ISA clones of ops.cpp): libm's expf is a scalar call per
// element and dominated attention and SiLU in profiles.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace troupe::kernels::cpu {

// exp(x) with relative error < 2e-7 on [-87, 88]; inputs below -87 give ~0, above 88 are clamped.
// Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, 2^n assembled in the exponent bits.
// Every multiply-add is one fused operation, the sequence of exp8 (vec_math_avx2.hpp) and exp16
// (vec_math_avx512.hpp), so softmax and SiLU give the same bits on every back-end.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_roundevenf(x * 1.44269504088896341f);
  float r = std::fma(-n, 0.693359375f, x);
  r = std::fma(-n, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float pr = p * r;
  p = std::fma(pr, r, r) + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace troupe::kernels::cpu
