// exp(x) for x <= 0 in plain float arithmetic that GCC vectorises (SSE4 baseline): the sampler
// exponentiates a whole 151,936-entry row, where scalar std::exp alone would cost ~1 ms.
// Relative error <= 2e-7 on [-87, 0]; exactly 1 at 0; exactly 0 below about -87.7 and at -inf.
#pragma once

#include <bit>
#include <cstdint>

namespace troupe::sampling_detail {

inline float fast_exp_nonpositive(float x) {
  // Clamp first so -inf never reaches the float->int conversion (undefined there). At -88 the
  // rounding below gives n = -127, whose exponent bits are all zero: 2^n becomes exactly 0, so
  // masked (-inf) tokens get weight 0 without a final select (which GCC would not vectorise).
  const float xc = x > -88.0f ? x : -88.0f;
  // Round x / ln2 to the nearest integer n with the 1.5 * 2^23 trick (no libm call, vectorises).
  const float t = xc * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;
  // r = x - n ln2 in two steps (Cody-Waite) so r keeps full precision; |r| <= ln2 / 2.
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // Cephes expf minimax polynomial on [-ln2/2, ln2/2].
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n from its exponent bits; n in [-127, 0], and -127 encodes 0 (see the clamp).
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(e);
}

// out[i] = exp(in[i] - shift) for in[i] <= shift (the row maximum). in may alias out.
inline void fast_exp_shifted(const float* in, float shift, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fast_exp_nonpositive(in[i] - shift);
}

}  // namespace troupe::sampling_detail
