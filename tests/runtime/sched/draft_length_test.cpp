// The adaptive draft length's arithmetic: how many guesses pay for themselves at an acceptance and
// a guess's price, and the per-sequence acceptance estimate that feeds it.
#include <boost/test/unit_test.hpp>

#include "runtime/sched/draft_length.hpp"

using namespace troupe::sched;

BOOST_AUTO_TEST_SUITE(draft_length)

BOOST_AUTO_TEST_CASE(guesses_pay_while_acceptance_beats_their_price) {
  BOOST_TEST(worthwhile_guesses(1.0, 0.0, 5) == 5);   // free and always right: all of them
  BOOST_TEST(worthwhile_guesses(0.0, 0.1, 5) == 0);   // never right: none
  BOOST_TEST(worthwhile_guesses(1.0, 1.0, 5) == 0);   // a draft as large as the model never pays
  // One guess pays exactly when it is right more often than it costs: 1 + a against 1 + c.
  BOOST_TEST(worthwhile_guesses(0.31, 0.3, 5) >= 1);
  BOOST_TEST(worthwhile_guesses(0.29, 0.3, 5) == 0);
  // Qwen3-0.6B drafting for Qwen3-8B (c ~ 0.08): most of k at a good acceptance, fewer at a middling one.
  BOOST_TEST(worthwhile_guesses(0.8, 0.08, 8) >= 5);
  BOOST_TEST(worthwhile_guesses(0.8, 0.3, 8) == 3);  // 2.95 tokens for 1.9 beats 3.36 for 2.2
  BOOST_TEST(worthwhile_guesses(0.5, 0.3, 8) == 1);
  // More guesses never pay less as acceptance rises.
  int32_t last = 0;
  for (double a = 0; a <= 1.0; a += 0.05) {
    const int32_t k = worthwhile_guesses(a, 0.2, 8);
    BOOST_TEST(k >= last, "acceptance " << a);
    last = k;
  }
}

BOOST_AUTO_TEST_CASE(the_estimate_follows_recent_steps) {
  acceptance_estimate e;
  BOOST_TEST(e.rate() == 0.8, boost::test_tools::tolerance(1e-12));  // the prior
  for (int i = 0; i < 10; ++i) e.observe(4, 0);  // the first guess fails: one tested, none right
  BOOST_TEST(e.rate() < 0.05);
  for (int i = 0; i < 10; ++i) e.observe(4, 4);  // all four right
  BOOST_TEST(e.rate() > 0.95);
  acceptance_estimate f;
  for (int i = 0; i < 40; ++i) f.observe(4, 1);  // one right, then a miss: half the tested ones
  BOOST_TEST(f.rate() == 0.5, boost::test_tools::tolerance(1e-3));
  f.observe(0, 0);  // a step without guesses says nothing
  BOOST_TEST(f.rate() == 0.5, boost::test_tools::tolerance(1e-3));
}

BOOST_AUTO_TEST_SUITE_END()
