// Plugin policies inside the scheduler: their admission order and preemption victims are the
// scheduler's decisions, and swapping policies between steps loses and repeats nothing.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/plugin_host/plugin_policy.hpp"
#include "tests/runtime/plugin_host/sim.hpp"

using namespace troupe::plugin_host;
using namespace host_test;

BOOST_AUTO_TEST_CASE(the_scheduler_admits_in_the_plugins_order) {
  sched_config c;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 16;
  sim s(c, 8, 4, load_policy("priority", "aging_ms=0"));
  s.add(req(1, 4, 2, 3));
  s.add(req(2, 4, 2, 1));
  s.add(req(3, 4, 2, 2));
  s.add(req(4, 4, 2, 0));
  s.run();
  s.check_all_served();
  BOOST_TEST(s.first_scheduled == (std::vector<int64_t>{4, 2, 3, 1}));
}

// A (id 1, priority 5) arrives before B (id 2, priority 0); both decode until the 4-block pool
// runs out: after the prefill step and four decodes each holds 8 tokens in 2 blocks and needs a
// third. fcfs preempts the later arrival (B), priority the less urgent (A). Decodes run in
// arrival order either way; only admission (step 1) and the victim follow the policy.
std::vector<std::string> victim_trace(const char* policy) {
  sched_config c;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 16;
  sim s(c, 4, 4, load_policy(policy, policy == std::string("priority") ? "aging_ms=0" : ""));
  s.add(req(1, 4, 8, 5));  // A
  s.add(req(2, 4, 8, 0));  // B
  std::vector<std::string> steps;
  while (!s.s.idle()) steps.push_back(s.step());
  s.check_all_served();
  return steps;
}

BOOST_AUTO_TEST_CASE(the_scheduler_preempts_the_plugins_victim) {
  using v = std::vector<std::string>;
  BOOST_TEST(victim_trace("fcfs") == (v{"1 2", "1 2", "1 2", "1 2", "1 2", "!2 1", "1", "1", "2", "2", "2"}),
             boost::test_tools::per_element());
  BOOST_TEST(victim_trace("priority") == (v{"2 1", "1 2", "1 2", "1 2", "1 2", "!1 2", "2", "2", "1", "1", "1"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(swapping_policies_mid_run_loses_no_request) {
  auto counters = std::make_shared<policy_counters>();
  host_options opts;
  opts.counters = counters;
  sched_config c;
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 24;
  c.max_model_len = 32;
  sim s(c, 20, 4, load_policy("fcfs", "", opts));
  int64_t next = 1;
  auto add_some = [&](int n) {
    for (int i = 0; i < n; ++i, ++next)
      s.add(req(next, 3 + static_cast<int32_t>(next % 7), 5 + static_cast<int32_t>(next % 11),
                static_cast<int32_t>(next % 4), next % 2 ? "a" : "b"));
  };
  const std::pair<const char*, const char*> sequence[] = {{"priority", "aging_ms=10"},
                                                          {"fair-share", "weight.a=2"},
                                                          {"shortest-first", "max_wait_ms=50"},
                                                          {"cache-aware", ""},
                                                          {"fcfs", ""}};
  add_some(20);
  for (auto [name, config] : sequence) {
    for (int i = 0; i < 6; ++i) s.step();
    BOOST_TEST_CONTEXT("swap to " << name) {
      auto running = s.s.running_ids(), waiting = s.s.waiting_ids();
      BOOST_REQUIRE(!running.empty());
      s.s.set_policy(load_policy(name, config, opts));
      s.s.check_invariants();
      BOOST_TEST(s.s.current_policy().name() == std::string_view(name));
      // Nothing moved between the queues; only the order may change.
      auto r2 = s.s.running_ids(), w2 = s.s.waiting_ids();
      std::sort(running.begin(), running.end()), std::sort(r2.begin(), r2.end());
      std::sort(waiting.begin(), waiting.end()), std::sort(w2.begin(), w2.end());
      BOOST_TEST(running == r2);
      BOOST_TEST(waiting == w2);
    }
    add_some(5);
  }
  // A refused swap leaves the running policy in place.
  BOOST_CHECK_THROW(s.s.set_policy(load_policy("no-such-policy", "", opts)), troupe::error);
  BOOST_TEST(s.s.current_policy().name() == "fcfs");
  // And the built-in C++ policy can take over from a plugin, and a plugin from it.
  s.step();
  s.s.set_policy(troupe::sched::make_policy("priority"));
  s.step();
  s.s.set_policy(load_policy("fair-share", "", opts));
  s.run();
  s.check_all_served();
  BOOST_TEST(s.specs.size() == 45u);
  BOOST_TEST(counters->fallbacks.load() == 0);
  BOOST_TEST(counters->load_failures.load() == 1);
}
