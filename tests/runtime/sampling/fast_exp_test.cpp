// fast_exp_nonpositive against std::exp in double: the accuracy the sampler's weights rely on.
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/sampling/fast_exp.hpp"
#include "runtime/sampling/row.hpp"

using troupe::sampling_detail::fast_exp_nonpositive;
using troupe::sampling_detail::fast_exp_shifted;

BOOST_AUTO_TEST_SUITE(fast_exp)

BOOST_AUTO_TEST_CASE(relative_error_below_2e_7_and_monotone) {
  double worst = 0.0;
  float prev = 2.0f;
  int not_monotone = 0;
  // Every 4096th float from -0 down to -87 (the bit patterns count up): about 270,000 points.
  for (float x = -0.0f; x > -87.0f;) {
    const double exact = std::exp(static_cast<double>(x));
    const float v = fast_exp_nonpositive(x);
    worst = std::max(worst, std::fabs(static_cast<double>(v) - exact) / exact);
    if (v > prev) ++not_monotone;
    prev = v;
    x = std::bit_cast<float>(std::bit_cast<uint32_t>(x) + 4096u);
  }
  BOOST_TEST(worst < 2e-7, "worst relative error " << worst);
  BOOST_TEST(not_monotone == 0);
}

BOOST_AUTO_TEST_CASE(exact_points) {
  BOOST_TEST(fast_exp_nonpositive(0.0f) == 1.0f);
  BOOST_TEST(fast_exp_nonpositive(-0.0f) == 1.0f);
  BOOST_TEST(fast_exp_nonpositive(-88.0f) == 0.0f);
  BOOST_TEST(fast_exp_nonpositive(-1000.0f) == 0.0f);
  BOOST_TEST(fast_exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
}

BOOST_AUTO_TEST_CASE(row_version_matches_the_scalar_one) {
  std::vector<float> in = {3.0f, 1.0f, -2.5f, -std::numeric_limits<float>::infinity(), 2.0f};
  std::vector<float> out(in.size());
  fast_exp_shifted(in.data(), 3.0f, out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) BOOST_TEST(out[i] == fast_exp_nonpositive(in[i] - 3.0f));
  BOOST_TEST(out[0] == 1.0f);
  BOOST_TEST(out[3] == 0.0f);
}

BOOST_AUTO_TEST_CASE(library_builds_are_bit_identical) {
  // The library's vectorised builds (SSE baseline, AVX2) against this file's scalar reference:
  // equal bits, so the same seed gives the same tokens on machines with and without AVX2.
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<float> uni(-100.0f, 0.0f);
  std::vector<float> in(100003);  // odd length: exercises the vector tails
  for (float& x : in) x = uni(gen);
  in[5] = 0.0f;
  in[6] = -std::numeric_limits<float>::infinity();
  std::vector<float> base(in.size()), avx2(in.size());
  const auto n = static_cast<int64_t>(in.size());
  troupe::sampling_detail::exp_row_baseline(in.data(), 0.0f, base.data(), n);
  size_t differ = 0;
  for (size_t i = 0; i < in.size(); ++i)
    differ += std::bit_cast<uint32_t>(base[i]) != std::bit_cast<uint32_t>(fast_exp_nonpositive(in[i]));
  BOOST_TEST(differ == 0u);
  if (!troupe::sampling_detail::cpu_has_avx2()) {
    BOOST_TEST_MESSAGE("no AVX2 on this CPU: only the baseline build was checked");
    return;
  }
  troupe::sampling_detail::exp_row_avx2(in.data(), 0.0f, avx2.data(), n);
  differ = 0;
  for (size_t i = 0; i < in.size(); ++i)
    differ += std::bit_cast<uint32_t>(base[i]) != std::bit_cast<uint32_t>(avx2[i]);
  BOOST_TEST(differ == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
