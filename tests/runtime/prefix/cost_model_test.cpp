// The fetch-or-recompute decision: priors, measurements replacing them, the budget cap.
#include <boost/test/unit_test.hpp>

#include "runtime/prefix/cost_model.hpp"

using namespace troupe::prefix;

BOOST_AUTO_TEST_SUITE(cost_model_suite)

BOOST_AUTO_TEST_CASE(fetch_when_faster_recompute_when_not) {
  cost_options o;
  o.prior_bytes_per_s = 1e9;
  o.prior_round_trip_s = 0.001;
  o.prior_prefill_tokens_per_s = 1000;
  o.budget_safety = 1.0;
  cost_model m(o);
  // 10 blocks of 16 tokens, 1 MB each: fetch 0.011 s, recompute 0.16 s.
  auto p = m.decide(10, 1000000, 16, 1.0);
  BOOST_TEST(p.num_blocks == 10u);
  BOOST_TEST(p.fetch_s == 0.011, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(p.recompute_s == 0.16, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(!p.budget_limited);
  // 100 MB blocks: 1 s to fetch 10 of them would not beat 0.16 s of prefill; the budget (1 s)
  // fits 9, still slower than recomputing them.
  p = m.decide(10, 100000000, 16, 1.0);
  BOOST_TEST(p.num_blocks == 0u);
  BOOST_TEST(p.budget_limited);
  // Nothing available, or no budget left.
  BOOST_TEST(m.decide(0, 1000, 16, 1.0).num_blocks == 0u);
  BOOST_TEST(m.decide(5, 1000000, 16, 0.0005).num_blocks == 0u);
}

BOOST_AUTO_TEST_CASE(the_budget_caps_the_number_of_blocks) {
  cost_options o;
  o.prior_bytes_per_s = 1e9;
  o.prior_round_trip_s = 0.0;
  o.prior_prefill_tokens_per_s = 10;  // recomputing is very slow
  o.budget_safety = 0.5;
  cost_model m(o);
  auto p = m.decide(1000, 10000000, 16, 0.1);  // 0.05 s usable at 10 ms per block: 5 blocks
  BOOST_TEST(p.num_blocks == 5u);
  BOOST_TEST(p.budget_limited);
}

BOOST_AUTO_TEST_CASE(measurements_replace_the_priors_then_blend) {
  cost_options o;
  o.prior_bytes_per_s = 1e9;
  o.prior_round_trip_s = 0.0;
  o.prior_prefill_tokens_per_s = 500;
  o.smoothing = 0.5;
  cost_model m(o);
  m.observe_prefill(8, 1.0);  // too few tokens to say anything about prefill
  BOOST_TEST(m.prefill_tokens_per_s() == 500.0);
  m.observe_prefill(100, 1.0);
  BOOST_TEST(m.prefill_tokens_per_s() == 100.0);
  m.observe_prefill(300, 1.0);
  BOOST_TEST(m.prefill_tokens_per_s() == 200.0);
  m.observe_fetch(1000, 1.0);  // too small to measure bandwidth
  BOOST_TEST(m.bytes_per_s() == 1e9);
  m.observe_fetch(4000000, 2.0);
  BOOST_TEST(m.bytes_per_s() == 2e6);
  m.observe_fetch(4000000, 1.0);
  BOOST_TEST(m.bytes_per_s() == 3e6);
  m.observe_round_trip(0.002);
  BOOST_TEST(m.round_trip_s() == 0.001);
}

BOOST_AUTO_TEST_SUITE_END()
