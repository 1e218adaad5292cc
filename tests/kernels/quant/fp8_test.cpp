// FP8 E4M3 conversions (runtime/core/dtype.hpp): every code's exact value, round trips, rounding
// to nearest even between neighbours, saturation and NaN.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/fp8_activations.hpp"
#include "runtime/core/dtype.hpp"

using troupe::f32_to_f8e4m3;
using troupe::f8e4m3_to_f32;

BOOST_AUTO_TEST_CASE(e4m3_codes_have_their_documented_values) {
  BOOST_TEST(f8e4m3_to_f32(0x00) == 0.0f);
  BOOST_TEST(std::signbit(f8e4m3_to_f32(0x80)));
  BOOST_TEST(f8e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));   // smallest subnormal
  BOOST_TEST(f8e4m3_to_f32(0x07) == 7 * std::ldexp(1.0f, -9));
  BOOST_TEST(f8e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));   // smallest normal
  BOOST_TEST(f8e4m3_to_f32(0x38) == 1.0f);
  BOOST_TEST(f8e4m3_to_f32(0x3c) == 1.5f);
  BOOST_TEST(f8e4m3_to_f32(0x7e) == 448.0f);
  BOOST_TEST(f8e4m3_to_f32(0xfe) == -448.0f);
  BOOST_TEST(std::isnan(f8e4m3_to_f32(0x7f)));
  BOOST_TEST(std::isnan(f8e4m3_to_f32(0xff)));
}

BOOST_AUTO_TEST_CASE(every_finite_code_round_trips_and_midpoints_round_to_even) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const float v = f8e4m3_to_f32(static_cast<uint8_t>(c));
    BOOST_TEST(f32_to_f8e4m3(v) == (c == 0x80 ? 0x80 : c), "code " << c);
  }
  // Between consecutive positive codes: just below the midpoint rounds down, just above up, the
  // midpoint itself to the even code (the one whose mantissa's last bit is 0).
  for (int c = 0; c < 0x7e; ++c) {
    const float a = f8e4m3_to_f32(static_cast<uint8_t>(c)), b = f8e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = (a + b) / 2;  // exact: both have few significant bits
    BOOST_TEST(f32_to_f8e4m3(std::nextafter(mid, a)) == c);
    BOOST_TEST(f32_to_f8e4m3(std::nextafter(mid, b)) == c + 1);
    BOOST_TEST(f32_to_f8e4m3(mid) == ((c & 1) == 0 ? c : c + 1), "midpoint after code " << c);
    BOOST_TEST(f32_to_f8e4m3(-mid) == (0x80 | ((c & 1) == 0 ? c : c + 1)));
  }
}

BOOST_AUTO_TEST_CASE(large_values_saturate_and_nan_stays_nan) {
  BOOST_TEST(f32_to_f8e4m3(449.0f) == 0x7e);
  BOOST_TEST(f32_to_f8e4m3(1e30f) == 0x7e);
  BOOST_TEST(f32_to_f8e4m3(-INFINITY) == 0xfe);
  BOOST_TEST(f32_to_f8e4m3(NAN) == 0x7f);
  BOOST_TEST(f32_to_f8e4m3(std::ldexp(1.0f, -11)) == 0x00);  // below half the smallest subnormal
  BOOST_TEST(f32_to_f8e4m3(std::ldexp(3.0f, -10)) == 0x02);  // 1.5 subnormal steps -> 2 (even)
  BOOST_TEST(f32_to_f8e4m3(std::ldexp(5.0f, -10)) == 0x02);  // 2.5 steps -> 2 (even)
}

// The W8A8 activation rounding (kernels/fp8_activations.hpp): per 128-column group, scale
// max|x| / 448, values rounded to e4m3 times that scale; what round_fp8_act_rows gives is exactly
// the codes and scales quantize_fp8_act_row gives, multiplied back.
BOOST_AUTO_TEST_CASE(fp8_activation_rounding_is_codes_times_group_scales) {
  const int64_t n = 3, cols = 300;  // groups of 128, 128 and 44 columns
  std::vector<float> x(static_cast<size_t>(n * cols));
  uint32_t s = 12345;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 10.0f;
  }
  for (int64_t c = 128; c < 256; ++c) x[static_cast<size_t>(cols + c)] = 0.0f;  // row 1, group 1: all zero
  x[5] = 1000.0f;  // row 0, group 0: one large value sets the scale
  std::vector<float> y(x.size());
  troupe::kernels::round_fp8_act_rows(x.data(), n, cols, y.data());
  std::vector<uint8_t> codes(3 * 128);
  std::vector<float> scales(3);
  for (int64_t i = 0; i < n; ++i) {
    troupe::kernels::quantize_fp8_act_row(x.data() + i * cols, cols, codes.data(), scales.data());
    for (int64_t c = 0; c < cols; ++c) {
      const float want = f8e4m3_to_f32(codes[static_cast<size_t>(c)]) * scales[static_cast<size_t>(c / 128)];
      BOOST_TEST(y[static_cast<size_t>(i * cols + c)] == want, "row " << i << " column " << c);
      // e4m3 keeps 3 mantissa bits: within 2^-4 of the value, or of the smallest normal step.
      const float xv = x[static_cast<size_t>(i * cols + c)], yv = y[static_cast<size_t>(i * cols + c)];
      BOOST_TEST(std::fabs(yv - xv) <= std::fabs(xv) / 16 + scales[static_cast<size_t>(c / 128)] * std::ldexp(1.0f, -9));
    }
  }
  const float s0 = 1000.0f / 448.0f;  // row 0, group 0: its maximum is code 448
  BOOST_TEST(y[5] == 448.0f * s0);
  for (int64_t c = 128; c < 256; ++c) BOOST_TEST(y[static_cast<size_t>(cols + c)] == 0.0f);
  // In place gives the same.
  auto z = x;
  troupe::kernels::round_fp8_act_rows(z.data(), n, cols, z.data());
  BOOST_TEST(z == y);
}
