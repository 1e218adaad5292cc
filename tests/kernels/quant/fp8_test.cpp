// FP8 E4M3 conversions (runtime/core/dtype.hpp): every code's exact value, round trips, rounding
// to nearest even between neighbours, saturation and NaN.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>

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
