// Branch-free float math that GCC vectorises inside the ISA clones of kernels/cpu: libm's
// expf is a scalar call per element and dominated attention and SiLU in profiles.
#pragma once

#include <cstdint>
#include <cstring>

namespace troupe::kernels::cpu {

// exp(x) with relative error < 2e-7 on [-87, 88]; inputs below -87 give ~0, above 88 are clamped.
// Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, 2^n assembled in the exponent bits.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float n = __builtin_roundevenf(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace troupe::kernels::cpu
