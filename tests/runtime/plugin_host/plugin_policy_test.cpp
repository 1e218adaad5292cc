// Containment: every way a plugin can misbehave while the scheduler runs makes the adapter fall
// back to fcfs with a logged reason and a counted metric, and every request is still served
// exactly. Built-in plugins under real load never trip it.
#include <boost/test/unit_test.hpp>

#include "runtime/plugin_host/plugin_policy.hpp"
#include "tests/runtime/plugin_host/sim.hpp"

using namespace troupe::plugin_host;
using namespace host_test;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// 12 requests on a pool small enough to preempt: 16 blocks of 4 tokens, each request up to 20.
sched_config small_cfg(int32_t max_num_seqs = 8) {
  sched_config c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 32;
  return c;
}

struct outcome {
  std::vector<std::string> log;
  std::shared_ptr<policy_counters> counters = std::make_shared<policy_counters>();
  bool fell_back = false;
  std::string reason;
  std::string name_after;
  int64_t preemptions = 0;
};

outcome run_rogue(const std::string& config, int64_t starvation_limit = 20000, int32_t max_num_seqs = 8) {
  outcome o;
  host_options opts;
  opts.counters = o.counters;
  opts.log = [&o](const std::string& m) { o.log.push_back(m); };
  opts.starvation_limit = starvation_limit;
  auto pol = load_policy(TROUPE_ROGUE, config, opts);
  auto* raw = pol.get();
  sim s(small_cfg(max_num_seqs), 16, 4, std::move(pol));
  for (int64_t id = 1; id <= 12; ++id) s.add(req(id, 8, 12));
  s.run();
  s.check_all_served();
  o.fell_back = raw->fell_back();
  o.reason = raw->fallback_reason();
  o.name_after = std::string(raw->name());
  o.preemptions = s.preemptions;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_well_behaved_plugin_is_never_replaced) {
  auto o = run_rogue("mode=ok");
  BOOST_TEST(!o.fell_back);
  BOOST_TEST(o.name_after == "rogue");
  BOOST_TEST(o.counters->fallbacks.load() == 0);
  BOOST_TEST(o.log.empty());
  BOOST_TEST(o.preemptions > 0);  // the workload does exercise pick_victim
}

BOOST_AUTO_TEST_CASE(each_misbehaviour_falls_back_to_fcfs_and_serves_every_request) {
  const std::pair<const char*, const char*> cases[] = {
      {"mode=invent,after=2", "rank_waiting returned id 987654, which is no request it was told about"},
      {"mode=duplicate", "rank_waiting returned id 1 twice"},
      {"mode=short,after=1", "rank_waiting ranked 3 requests; expected min(capacity 4, waiting 8) = 4"},
      {"mode=running,after=1", "which is running, not waiting"},
      {"mode=error_rank,after=3", "rank_waiting returned error -1: rank exploded"},
      {"mode=throw_guarded", "rank_waiting returned error -1: caught by the guard"},
      {"mode=throw_raw,after=1", "rank_waiting threw a C++ exception across the C ABI: escaped from rank_waiting"},
      {"mode=bad_victim", "pick_victim chose id 424242, which is not one of the"},
      {"mode=error_update,after=5", "on_update returned error -1: update exploded"},
  };
  for (auto [config, reason] : cases) {
    BOOST_TEST_CONTEXT(config) {
      auto o = run_rogue(config);
      BOOST_TEST(o.fell_back);
      BOOST_TEST(contains(o.reason, reason), o.reason);
      BOOST_TEST(o.name_after == "fcfs");
      BOOST_TEST(o.counters->fallbacks.load() == 1);
      BOOST_REQUIRE_EQUAL(o.log.size(), 1u);
      BOOST_TEST(contains(o.log[0], "scheduling policy 'rogue' ("), o.log[0]);
      BOOST_TEST(contains(o.log[0], reason), o.log[0]);
      BOOST_TEST(contains(o.log[0], "; falling back to fcfs (no request is dropped)"), o.log[0]);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_request_the_policy_never_admits_trips_the_starvation_limit) {
  // Two slots; the rogue never ranks the oldest waiting request (id 1) while others wait.
  auto o = run_rogue("mode=starve", 5, 2);
  BOOST_TEST(o.fell_back);
  BOOST_TEST(o.reason ==
                 "request 1, the one waiting longest, was overtaken by 6 later requests (starvation_limit 5): "
                 "the policy does not admit it",
             o.reason);
  BOOST_TEST(o.counters->fallbacks.load() == 1);
  // Without a limit the same plugin is left alone (it starves id 1 until the queue drains).
  auto off = run_rogue("mode=starve", 0, 2);
  BOOST_TEST(!off.fell_back);
}

BOOST_AUTO_TEST_CASE(builtin_plugins_under_load_stay_in_charge) {
  // Mixed priorities and tenants, a pool that preempts, default starvation limit.
  const std::pair<const char*, const char*> all[] = {{"fcfs", ""},
                                                     {"priority", "aging_ms=1"},
                                                     {"fair-share", "weight.a=3,weight.b=1"},
                                                     {"shortest-first", ""},
                                                     {"cache-aware", ""}};
  for (auto [name, config] : all) {
    BOOST_TEST_CONTEXT(name) {
      host_options opts;
      std::vector<std::string> log;
      opts.log = [&log](const std::string& m) { log.push_back(m); };
      auto pol = load_policy(name, config, opts);
      auto* raw = pol.get();
      sim s(small_cfg(), 16, 4, std::move(pol));
      for (int64_t id = 1; id <= 40; ++id)
        s.add(req(id, 2 + static_cast<int32_t>(id % 9), 4 + static_cast<int32_t>(id * 7 % 13),
                  static_cast<int32_t>(id % 3), id % 4 == 0 ? "b" : "a"));
      s.run();
      s.check_all_served();
      BOOST_TEST(!raw->fell_back(), raw->fallback_reason());
      BOOST_TEST(log.empty());
      BOOST_TEST(raw->name() == std::string_view(name));
    }
  }
}

BOOST_AUTO_TEST_CASE(only_offered_requests_are_admitted) {
  // The scheduler may offer a subset of the waiting requests (prefix-cache look-ups in flight):
  // the plugin's order is kept, restricted to the offered ones.
  auto pol = load_policy("priority", "aging_ms=0");
  std::vector<troupe::sched::seq_view> views(6);
  for (int64_t id = 1; id <= 5; ++id) {
    auto& v = views[static_cast<size_t>(id)];
    v.seq_id = id;
    v.arrival = id;
    v.priority = static_cast<int32_t>(10 - id);  // 5 is the most urgent, 1 the least
    v.num_prompt_tokens = 4;
    v.max_output_tokens = 4;
    pol->on_waiting(v);
  }
  std::vector<int64_t> all = {1, 2, 3, 4, 5}, offered = {1, 2, 4}, out;
  pol->admit_order(all, 3, out);
  BOOST_TEST(out == (std::vector<int64_t>{5, 4, 3}));
  out.clear();
  pol->admit_order(offered, 2, out);
  BOOST_TEST(out == (std::vector<int64_t>{4, 2}));
  out.clear();
  pol->admit_order(offered, 10, out);
  BOOST_TEST(out == (std::vector<int64_t>{4, 2, 1}));
  BOOST_TEST(!pol->fell_back());
}
