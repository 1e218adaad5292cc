// The server's policy handle: start-up load, admin swaps (accepted and refused), fallback
// bookkeeping, and the Prometheus lines an operator reads.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/plugin_host/policy_control.hpp"
#include "tests/runtime/plugin_host/sim.hpp"

using namespace troupe::plugin_host;
using namespace host_test;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

sched_config cfg() {
  sched_config c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 32;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(start_swap_refuse_and_report) {
  std::vector<std::string> log;
  policy_control pc({.policy = "priority", .config = "aging_ms=5"}, [&](const std::string& m) { log.push_back(m); });
  sim s(cfg(), 16, 4, pc.initial());
  BOOST_TEST(pc.active() == "priority");
  BOOST_REQUIRE_EQUAL(log.size(), 1u);
  BOOST_TEST(contains(log[0], "scheduling policy 'priority' from "), log[0]);
  BOOST_TEST(contains(log[0], "with config \"aging_ms=5\""), log[0]);
  for (int64_t id = 1; id <= 10; ++id) s.add(req(id, 6, 10, static_cast<int32_t>(id % 3), id % 2 ? "a" : "b"));
  for (int i = 0; i < 4; ++i) s.step();

  auto ok = pc.swap(s.s, "fair-share", "weight.a=3");
  BOOST_TEST(ok.ok);
  BOOST_TEST(ok.policy == "fair-share");
  BOOST_TEST(ok.previous == "priority");
  BOOST_TEST(s.s.current_policy().name() == "fair-share");
  BOOST_TEST(contains(log.back(), "scheduling policy swapped: 'priority' -> 'fair-share' from "), log.back());

  auto bad = pc.swap(s.s, "fair-share", "weight.a=zero");
  BOOST_TEST(!bad.ok);
  BOOST_TEST(contains(bad.error, "config key 'weight.a' is 'zero'"), bad.error);
  BOOST_TEST(s.s.current_policy().name() == "fair-share");
  BOOST_TEST(contains(log.back(), "scheduling policy swap to 'fair-share' refused, 'fair-share' stays: "), log.back());
  auto missing = pc.swap(s.s, "nope", "");
  BOOST_TEST(!missing.ok);
  BOOST_TEST(contains(missing.error, "no scheduling policy plugin 'nope'"), missing.error);

  s.run();
  s.check_all_served();
  BOOST_TEST(pc.swaps() == 1);
  BOOST_TEST(pc.load_failures() == 2);
  BOOST_TEST(pc.fallbacks() == 0);
  std::string text;
  pc.render(text, "model_name=\"m\"");
  BOOST_TEST(contains(text, "troupe:policy_info{model_name=\"m\",policy=\"fair-share\",configured=\"fair-share\"} 1\n"), text);
  BOOST_TEST(contains(text, "# TYPE troupe:policy_fallbacks_total counter\ntroupe:policy_fallbacks_total{model_name=\"m\"} 0\n"), text);
  BOOST_TEST(contains(text, "troupe:policy_load_failures_total{model_name=\"m\"} 2\n"), text);
  BOOST_TEST(contains(text, "troupe:policy_swaps_total{model_name=\"m\"} 1\n"), text);
}

BOOST_AUTO_TEST_CASE(a_fallback_shows_in_the_metrics_and_the_log) {
  std::vector<std::string> log;
  policy_control pc({.policy = TROUPE_ROGUE, .config = "mode=invent,after=2"},
                    [&](const std::string& m) { log.push_back(m); });
  sim s(cfg(), 16, 4, pc.initial());
  for (int64_t id = 1; id <= 12; ++id) s.add(req(id, 8, 12));
  s.run();
  s.check_all_served();
  BOOST_TEST(pc.fallbacks() == 1);
  BOOST_TEST(pc.active() == "fcfs");
  BOOST_TEST(contains(log.back(), "misbehaved: rank_waiting returned id 987654"), log.back());
  std::string text;
  pc.render(text, "");
  BOOST_TEST(contains(text, "troupe:policy_info{policy=\"fcfs\",configured=\"rogue\"} 1\n"), text);
  BOOST_TEST(contains(text, "troupe:policy_fallbacks_total{} 1\n"), text);
  // A swap puts a healthy policy back in charge; the counter keeps the history.
  BOOST_TEST(pc.swap(s.s, "fcfs", "").ok);
  BOOST_TEST(pc.active() == "fcfs");
  BOOST_TEST(pc.fallbacks() == 1);
}

BOOST_AUTO_TEST_CASE(a_bad_start_policy_is_an_error) {
  policy_control pc({.policy = "no-such"}, [](const std::string&) {});
  BOOST_CHECK_THROW(pc.initial(), troupe::error);
  BOOST_TEST(pc.load_failures() == 1);
  policy_control bad_cfg({.policy = "priority", .config = "aging_ms=x"}, [](const std::string&) {});
  BOOST_CHECK_THROW(bad_cfg.initial(), troupe::error);
}
