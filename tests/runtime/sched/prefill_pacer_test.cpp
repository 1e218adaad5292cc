// prefill_pacer: the prompt-token cap of steps that also decode follows measured step times.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "runtime/sched/prefill_pacer.hpp"

using troupe::sched::prefill_pacer;

BOOST_AUTO_TEST_SUITE(prefill_pacer_suite)

BOOST_AUTO_TEST_CASE(before_both_costs_are_measured_the_cap_is_the_maximum_then_the_floor) {
  prefill_pacer p(1.0, 64, 8);
  BOOST_TEST(p.cap() == 64);
  p.observe(0, 512, 4.0);  // prompt only: says nothing about decodes
  BOOST_TEST(p.cap() == 64);
  p.observe(15, 32, 1.0);  // no decode-only step seen yet: cannot be split
  BOOST_TEST(p.cap() == 64);
  p.observe(15, 0, 0.1);   // decode steps known, a prompt token's cost not: probe with the floor
  BOOST_TEST(p.cap() == 8);
  BOOST_TEST(p.decode_step_seconds() == 0.1);
  p.observe(15, 8, 0.1 + 8 * 0.002);
  BOOST_TEST(p.cap() == 50);
}

BOOST_AUTO_TEST_CASE(the_cap_keeps_a_mixed_step_within_the_slowdown) {
  // Decode-only steps take 100 ms and each prompt token adds 5 ms: twice a decode step (slowdown
  // 1.0) leaves room for 20 prompt tokens.
  prefill_pacer p(1.0, 64);
  for (int i = 0; i < 20; ++i) {
    p.observe(15, 0, 0.100);
    int32_t n = p.cap();
    p.observe(15, n, 0.100 + 0.005 * n);
  }
  BOOST_TEST(p.cap() == 20);
  BOOST_TEST(p.seconds_per_prompt_token() == 0.005, boost::test_tools::tolerance(1e-9));
  // Half the slowdown, half the tokens.
  prefill_pacer q(0.5, 64);
  q.observe(15, 0, 0.100);
  q.observe(15, 32, 0.100 + 0.005 * 32);
  BOOST_TEST(q.cap() == 10);
}

BOOST_AUTO_TEST_CASE(a_decode_step_is_priced_by_its_number_of_decodes) {
  // Decode-only steps cost 40 ms + 7 ms per decode (seen at 2 and 16 decodes); a prompt token adds
  // 4 ms. A mixed step of 16 decodes must not be charged against the 2-decode step's time.
  prefill_pacer p(1.0, 256);
  for (int i = 0; i < 6; ++i) {
    p.observe(2, 0, 0.040 + 0.007 * 2);
    p.observe(16, 0, 0.040 + 0.007 * 16);
  }
  BOOST_TEST(p.decode_step_seconds() == 0.152, boost::test_tools::tolerance(1e-9));  // last step: 16
  p.observe(16, 8, 0.152 + 0.004 * 8);
  BOOST_TEST(p.seconds_per_prompt_token() == 0.004, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(p.cap() == 38);  // 0.152 / 0.004
  p.observe(2, 0, 0.054);     // two decodes now: a cheaper step, fewer prompt tokens fit
  BOOST_TEST(p.cap() == 13);  // 0.054 / 0.004
}

BOOST_AUTO_TEST_CASE(decodes_past_the_only_size_seen_are_priced_like_prompt_tokens) {
  // Every row costs 5 ms over 40 ms of fixed cost, decode or prompt. One stream decoded alone
  // (45 ms steps); then six streams arrive together, and every later step also prefills, so no
  // decode-only step of six is ever seen. The six decodes' extra 25 ms must not be charged to the
  // prompt tokens: that priced a prompt token at 5 + 25/p ms and pinned the cap to the floor (8).
  prefill_pacer p(1.0, 256, 8);
  for (int i = 0; i < 20; ++i) p.observe(1, 0, 0.045);
  auto step = [](int32_t decodes, int32_t prompt) { return 0.040 + 0.005 * (decodes + prompt); };
  for (int i = 0; i < 40; ++i) {
    const int32_t n = p.cap();
    p.observe(6, n, step(6, n));
  }
  BOOST_TEST(p.seconds_per_prompt_token() == 0.005, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(p.decode_step_seconds() == step(6, 0), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(p.cap() == 14);  // a(6) = 70 ms of room at 5 ms a token
  BOOST_TEST(step(6, p.cap()) <= 2 * step(6, 0));
  // A step with fewer decodes than the one size seen cannot be split: it leaves the price alone.
  prefill_pacer q(1.0, 256, 8);
  for (int i = 0; i < 5; ++i) q.observe(16, 0, step(16, 0));
  q.observe(16, 8, step(16, 8));
  const double price = q.seconds_per_prompt_token();
  BOOST_TEST(price == 0.005, boost::test_tools::tolerance(1e-9));
  q.observe(2, 8, step(2, 8));
  BOOST_TEST(q.seconds_per_prompt_token() == price);
}

BOOST_AUTO_TEST_CASE(the_cap_follows_a_prompt_token_that_gets_dearer) {
  // Attention over a growing context makes each prompt token dearer as a long prompt prefills.
  prefill_pacer p(1.0, 64);
  p.observe(8, 0, 0.080);
  double per_token = 0.001;
  p.observe(8, p.cap(), 0.080 + per_token * p.cap());  // the probe at the floor
  int32_t last = 64;
  for (int i = 0; i < 60; ++i) {
    int32_t n = p.cap();
    BOOST_TEST(n <= last);  // never grows while the cost only grows
    last = n;
    p.observe(8, n, 0.080 + per_token * n);
    per_token *= 1.02;
  }
  BOOST_TEST(p.cap() < 64);
  // The next mixed step stays within about twice the decode step: the average lags a cost that
  // grows 2% a step by under 10%.
  BOOST_TEST(0.080 + per_token * p.cap() <= 0.080 * (1 + 1.1));
}

BOOST_AUTO_TEST_CASE(bounds_and_bad_measurements) {
  prefill_pacer p(1.0, 64, 8);
  p.observe(4, 0, 0.010);
  p.observe(4, 16, 0.010 + 16 * 0.1);  // one prompt token costs ten decode steps
  BOOST_TEST(p.cap() == 8);            // the floor keeps the prompt moving
  prefill_pacer fast(1.0, 64);
  fast.observe(4, 0, 0.100);
  fast.observe(4, 16, 0.100 + 16 * 1e-6);
  BOOST_TEST(fast.cap() == 64);  // the configured cap is the ceiling
  prefill_pacer off(0.0, 48);
  off.observe(4, 0, 0.1);
  off.observe(4, 16, 1.0);
  BOOST_TEST(off.cap() == 48);
  prefill_pacer q(1.0, 64);
  q.observe(4, 0, -1.0);
  q.observe(4, 0, 0.0);
  q.observe(-1, 0, 0.1);
  BOOST_TEST(q.decode_step_seconds() == 0.0);
}


BOOST_AUTO_TEST_CASE(decodes_beside_a_long_prompt_keep_the_short_row_price) {
  // The serving bench's prefill run: one stream decoded alone, fourteen more arrived with short
  // prompts (so every later step also prefills and no decode-only step of 15 is seen), then a
  // 4,000-token prompt. Rows cost 8 ms over 40 ms of fixed cost, and a prompt token at position p
  // pays attention on top, 16 ms at p = 3,500. Pricing the 14 extra decodes like those dear prompt
  // tokens took the decode step for 390 ms instead of 160 and let mixed steps run at 3.3x.
  constexpr double kAttention = 0.016 / 3500;  // seconds per prompt token and key
  auto step = [&](int32_t decodes, int32_t prompt, int32_t pos) {
    return 0.040 + 0.008 * (decodes + prompt) + kAttention * prompt * (pos + prompt / 2.0);
  };
  prefill_pacer p(1.0, 256, 8);
  for (int i = 0; i < 5; ++i) p.observe(1, 0, step(1, 0, 0));
  for (int32_t d = 2; d <= 15; ++d)  // each short prompt in one or two chunks from position 0
    for (int32_t pos = 0; pos < 32;) {
      const int32_t n = std::min(p.cap(), 32 - pos);
      p.observe(d, n, step(d, n, pos), pos + n);
      pos += n;
    }
  BOOST_TEST(p.seconds_per_decode_row() == 0.008, boost::test_tools::tolerance(0.05));
  double worst = 0;
  for (int32_t pos = 0; pos < 4000;) {
    const int32_t n = std::min(p.cap(), 4000 - pos);
    const double t = step(15, n, pos);
    if (pos > 1000 && n > 8) worst = std::max(worst, t / step(15, 0, 0));  // (at the floor, the floor rules)
    p.observe(15, n, t, pos + n);
    pos += n;
  }
  BOOST_TEST(p.decode_step_seconds() == step(15, 0, 0), boost::test_tools::tolerance(0.05));
  BOOST_TEST(worst <= 2.1);  // the slowdown asked for is 1.0 (2x), with the average's lag
  BOOST_TEST(worst >= 1.9);  // and the prompt still gets the room
}

BOOST_AUTO_TEST_CASE(the_floor_is_the_configured_minimum) {
  // Dear prompt tokens (40 ms each against a 100 ms decode step): 2 fit in the slowdown. The floor
  // (scheduler.min_prefill_tokens_while_decoding) wins where it is higher.
  for (int32_t floor : {1, 2, 8}) {
    prefill_pacer p(1.0, 64, floor);
    p.observe(15, 0, 0.100);
    p.observe(15, 8, 0.100 + 0.040 * 8);
    BOOST_TEST(p.cap() == std::max(floor, 2), "floor " << floor);
  }
}

BOOST_AUTO_TEST_SUITE_END()
