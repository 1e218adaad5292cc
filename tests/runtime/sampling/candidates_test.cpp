// The top-k candidate path: selection against a full sort, and the draw's inverse CDF.
#include <boost/test/unit_test.hpp>

#include <random>
#include <set>
#include <vector>

#include "runtime/sampling/candidates.hpp"
#include "tests/runtime/sampling/test_util.hpp"

using namespace troupe::sampling_detail;
using troupe::test::kNegInf;

BOOST_AUTO_TEST_SUITE(candidates)

BOOST_AUTO_TEST_CASE(select_top_k_equals_the_sorted_prefix) {
  std::mt19937_64 gen(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t vocab : {size_t{7}, size_t{3000}, size_t{151936}}) {
    for (int shape = 0; shape < 3; ++shape) {
      std::vector<float> l(vocab);
      for (size_t i = 0; i < vocab; ++i) {
        const float x = normal(gen);
        // 0: distinct; 1: heavy ties; 2: ascending (every token beats the last: worst order).
        l[i] = shape == 0 ? x : shape == 1 ? std::round(x) : static_cast<float>(i) * 1e-3f;
      }
      if (vocab > 7) l[vocab / 2] = kNegInf;
      std::vector<candidate> all;
      for (size_t i = 0; i < vocab; ++i) all.emplace_back(l[i], static_cast<int32_t>(i));
      std::sort(all.begin(), all.end(), by_rank{});
      for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{20}, int64_t{300}, int64_t{1024}}) {
        if (static_cast<size_t>(k) >= vocab) continue;
        std::vector<candidate> got;
        select_top_k(l, k, got);
        std::sort(got.begin(), got.end(), by_rank{});
        const std::vector<candidate> want(all.begin(), all.begin() + k);
        BOOST_TEST((got == want), "vocab " << vocab << " shape " << shape << " k " << k);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(select_top_k_skips_minus_infinity) {
  const std::vector<float> l = {kNegInf, 1.0f, kNegInf, 0.5f, kNegInf};
  std::vector<candidate> got;
  select_top_k(l, 4, got);
  std::sort(got.begin(), got.end(), by_rank{});
  BOOST_TEST((got == std::vector<candidate>{{1.0f, 1}, {0.5f, 3}}));
}

BOOST_AUTO_TEST_CASE(draw_candidates_inverts_the_cdf_under_top_p_and_min_p) {
  // Weights 4, 2, 1, 1 (ids 9, 4, 7, 2). top_p = 0.7: 4/8 < 0.7 <= 6/8, keep 9 and 4 (total 6).
  auto make = [] {
    return std::vector<candidate>{{std::log(1.0f), 7}, {std::log(4.0f), 9},
                                  {std::log(2.0f), 4}, {std::log(1.0f), 2}};
  };
  auto draw = [&](float top_p, float min_p_log, double u) {
    auto c = make();
    return draw_candidates(c, top_p, min_p_log, u);
  };
  BOOST_TEST(draw(0.7f, kNegInf, 0.0) == 9);
  BOOST_TEST(draw(0.7f, kNegInf, 0.66) == 9);  // 4/6 = 0.667
  BOOST_TEST(draw(0.7f, kNegInf, 0.67) == 4);
  BOOST_TEST(draw(0.7f, kNegInf, 0.9999) == 4);
  // top_p = 0.8 reaches 7/8 at id 2 (ties on weight 1 go to the lower id: 2 before 7).
  BOOST_TEST(draw(0.8f, kNegInf, 0.9999) == 2);
  // min-p 0.4 keeps weights >= 1.6: 9 and 4. Without top-p the walk order is not the rank order
  // (only the set and the weights are defined), so check the set over the whole u range.
  std::set<int32_t> seen;
  for (int i = 0; i < 100; ++i) seen.insert(draw(1.0f, std::log(0.4f), (i + 0.5) / 100.0));
  BOOST_TEST(seen == (std::set<int32_t>{9, 4}));
  BOOST_TEST(draw(0.3f, std::log(0.4f), 0.9999) == 9);  // top-p is stricter here
}

BOOST_AUTO_TEST_CASE(lazy_sort_handles_a_long_top_p_walk) {
  // 1000 candidates of equal weight: top_p = 0.9 keeps the 900 lowest ids, found across the
  // doubling sort chunks; u just below 1 draws the last of them.
  std::vector<candidate> c;
  for (int32_t i = 999; i >= 0; --i) c.emplace_back(0.0f, i);
  BOOST_TEST(draw_candidates(c, 0.9f, kNegInf, 0.99999) == 899);
}

BOOST_AUTO_TEST_SUITE_END()
