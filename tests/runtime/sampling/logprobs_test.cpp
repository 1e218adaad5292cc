// logprobs_of against a direct double-precision log_softmax (to 1e-6: its exponentials are the
// sampler's float ones), and its refusals.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/core/error.hpp"
#include "runtime/sampling/logprobs.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(logprobs_suite)

BOOST_AUTO_TEST_CASE(match_a_direct_log_softmax) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<float> row(151936);
  for (auto& x : row) x = d(rng);
  row[1234] = 30.0f;
  row[99] = row[100] = 25.0f;  // a tie: the lower id first
  double z = 0;
  for (float x : row) z += std::exp(static_cast<double>(x));
  const double log_z = std::log(z);
  auto lp = logprobs_of(row, 100, 5);
  BOOST_TEST(std::abs(lp.logprob - (25.0 - log_z)) < 1e-6);
  BOOST_REQUIRE_EQUAL(lp.top.size(), 5u);
  BOOST_TEST(lp.top[0].first == 1234);
  BOOST_TEST(lp.top[1].first == 99);
  BOOST_TEST(lp.top[2].first == 100);
  for (size_t i = 0; i < lp.top.size(); ++i) {
    BOOST_TEST(std::abs(lp.top[i].second - (row[static_cast<size_t>(lp.top[i].first)] - log_z)) < 1e-6);
    if (i) BOOST_TEST(lp.top[i].second <= lp.top[i - 1].second);
  }
  // Every other entry is below the last of the top 5.
  for (size_t i = 0; i < row.size(); ++i)
    if (std::none_of(lp.top.begin(), lp.top.end(), [&](auto& p) { return p.first == static_cast<int32_t>(i); }))
      BOOST_TEST_REQUIRE(row[i] <= row[static_cast<size_t>(lp.top.back().first)]);
  BOOST_TEST(logprobs_of(row, 1234, 0).top.empty());
  BOOST_TEST(logprobs_of(row, 1234, 20).top.size() == 20u);
  // The token and its rank, vLLM's: how many are at least as likely (a tie counts both).
  BOOST_TEST(lp.id == 100);
  BOOST_TEST(lp.rank == 3);
  BOOST_TEST(logprobs_of(row, 99, 0).rank == 3);
  BOOST_TEST(logprobs_of(row, 1234, 0).rank == 1);
  const int32_t low = static_cast<int32_t>(std::min_element(row.begin(), row.end()) - row.begin());
  BOOST_TEST(logprobs_of(row, low, 0).rank == static_cast<int32_t>(row.size()));
  for (int32_t id : {0, 5000, 77777}) {  // against a direct count
    int32_t n = 0;
    for (float x : row) n += x >= row[static_cast<size_t>(id)];
    BOOST_TEST(logprobs_of(row, id, 2).rank == n);
  }
}

BOOST_AUTO_TEST_CASE(refusals) {
  std::vector<float> row(8, 0.0f);
  BOOST_CHECK_THROW(logprobs_of(row, 8, 1), troupe::error);
  BOOST_CHECK_THROW(logprobs_of(row, -1, 1), troupe::error);
  BOOST_CHECK_THROW(logprobs_of(row, 0, 21), troupe::error);
  BOOST_TEST(std::abs(logprobs_of(row, 3, 0).logprob - std::log(1.0 / 8)) < 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
