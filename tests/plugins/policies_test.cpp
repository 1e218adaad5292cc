// The built-in policies, each loaded from its .so and driven through the C ABI with synthetic
// workloads whose right answer is worked out by hand in the comments.
#define BOOST_TEST_MODULE plugins
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "tests/plugins/policy_driver.hpp"

using namespace policy_test;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(config_items_are_split_and_trimmed) {
  const char* text = " a = 1 ,b=2;\n c ;;weight.x=3 ";
  const char* cursor = text;
  troupe_policy_config_item it;
  std::vector<std::pair<std::string, std::string>> got;
  while (troupe_policy_config_next(&cursor, &it))
    got.emplace_back(std::string(it.key, it.key_len), it.value ? std::string(it.value, it.value_len) : "<none>");
  std::vector<std::pair<std::string, std::string>> want = {{"a", "1"}, {"b", "2"}, {"c", "<none>"}, {"weight.x", "3"}};
  BOOST_TEST(got == want);
  cursor = "";
  BOOST_TEST(troupe_policy_config_next(&cursor, &it) == 0);
}

BOOST_AUTO_TEST_CASE(every_builtin_names_itself_and_its_version) {
  const std::pair<const char*, const char*> all[] = {{TROUPE_POLICY_FCFS, "fcfs"},
                                                     {TROUPE_POLICY_PRIORITY, "priority"},
                                                     {TROUPE_POLICY_FAIR_SHARE, "fair-share"},
                                                     {TROUPE_POLICY_SHORTEST_FIRST, "shortest-first"},
                                                     {TROUPE_POLICY_CACHE_AWARE, "cache-aware"}};
  for (auto [path, name] : all) {
    driver d(path);
    BOOST_TEST(std::string(d.api().name) == name);
    BOOST_TEST(d.api().abi_version == TROUPE_POLICY_ABI_VERSION);
    BOOST_TEST(d.api().struct_size == sizeof(troupe_policy_api));
  }
}

// ---- fcfs ---------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(fcfs_admits_in_arrival_order_and_preempts_the_latest) {
  driver d(TROUPE_POLICY_FCFS);
  d.arrive({5});
  d.arrive({3});
  d.arrive({9});
  BOOST_TEST(d.rank(0, 10) == (ids{5, 3, 9}));
  BOOST_TEST(d.rank(0, 2) == (ids{5, 3}));
  d.run(5);
  d.run(3);
  BOOST_TEST(d.rank(0, 10) == (ids{9}));
  d.preempt(5);  // back to waiting: it still arrived before 9
  BOOST_TEST(d.rank(0, 10) == (ids{5, 9}));
  d.run(5);
  d.run(9);
  BOOST_TEST(d.rank(0, 10).empty());
  BOOST_TEST(d.victim(0, {3, 9, 5}) == 9);
  BOOST_TEST(d.victim(0, {5, 3}) == 3);
  d.finish(9);
  d.finish(3);
  d.finish(5);
  BOOST_TEST(d.rank(0, 10).empty());
}

BOOST_AUTO_TEST_CASE(fcfs_reports_calls_out_of_order_and_bad_config) {
  driver d(TROUPE_POLICY_FCFS);
  BOOST_TEST(contains(d.on_running_error(42), "request 42 is unknown to the policy"));
  auto e = driver::create_error(TROUPE_POLICY_FCFS, "x=1");
  BOOST_TEST(contains(e, "policy 'fcfs': unknown config key 'x'; expected no keys"), e);
  e = driver::create_error(TROUPE_POLICY_FCFS, "novalue");
  BOOST_TEST(contains(e, "config item 'novalue' has no '='"), e);
}

// ---- priority -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(priority_strict_orders_by_priority_then_arrival) {
  driver d(TROUPE_POLICY_PRIORITY, "aging_ms=0");
  d.arrive({.id = 1, .priority = 5});
  d.arrive({.id = 2, .priority = 0});
  d.arrive({.id = 3, .priority = 5});
  d.arrive({.id = 4, .priority = -1});
  BOOST_TEST(d.rank(0, 10) == (ids{4, 2, 1, 3}));
  for (int64_t id : {1, 2, 3, 4}) d.run(id);
  // The least urgent: priority 5, and of the two the later arrival.
  BOOST_TEST(d.victim(0, {1, 2, 3, 4}) == 3);
  BOOST_TEST(d.victim(0, {2, 4}) == 2);
}

BOOST_AUTO_TEST_CASE(priority_ages_one_level_per_aging_ms) {
  driver d(TROUPE_POLICY_PRIORITY, "aging_ms=1000");
  // Keys priority * 1 s + arrival: 1 -> 2.0 s, 2 -> 1.5 s, 3 -> 1.2 s, 4 -> 2.1 s.
  d.arrive({.id = 1, .arrival_ns = 0, .priority = 2});
  d.arrive({.id = 2, .arrival_ns = 1500 * ms, .priority = 0});
  d.arrive({.id = 3, .arrival_ns = 200 * ms, .priority = 1});
  BOOST_TEST(d.rank(2000 * ms, 10) == (ids{3, 2, 1}));
  d.arrive({.id = 4, .arrival_ns = 2100 * ms, .priority = 0});
  BOOST_TEST(d.rank(2100 * ms, 10) == (ids{3, 2, 1, 4}));
}

// A priority-2 request and a stream of priority-0 arrivals every 100 ms, one admitted per step:
// with 1 s aging the old request's key (2.0 s) beats the arrival at 2.0 s (tie, earlier
// arrival wins), so it is admitted at step 20; strict priority never admits it.
int64_t admitted_at_step(const std::string& config) {
  driver d(TROUPE_POLICY_PRIORITY, config);
  d.arrive({.id = 1000, .arrival_ns = 0, .priority = 2});
  for (int64_t k = 1; k <= 100; ++k) {
    d.arrive({.id = k, .arrival_ns = k * 100 * ms, .priority = 0});
    auto first = d.rank(k * 100 * ms, 1);
    BOOST_REQUIRE_EQUAL(first.size(), 1u);
    d.run(first[0]);
    if (first[0] == 1000) return k;
  }
  return -1;
}

BOOST_AUTO_TEST_CASE(priority_aging_bounds_starvation) {
  BOOST_TEST(admitted_at_step("aging_ms=1000") == 20);
  BOOST_TEST(admitted_at_step("aging_ms=0") == -1);
}

BOOST_AUTO_TEST_CASE(priority_rejects_bad_aging) {
  auto e = driver::create_error(TROUPE_POLICY_PRIORITY, "aging_ms=-5");
  BOOST_TEST(contains(e, "config key 'aging_ms' is '-5'; expected a number in [0, 1000000000]"), e);
  e = driver::create_error(TROUPE_POLICY_PRIORITY, "aging_ms=1s");
  BOOST_TEST(contains(e, "config key 'aging_ms' is '1s'"), e);
}

// ---- fair-share ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(fair_share_interleaves_tenants_by_weight) {
  driver d(TROUPE_POLICY_FAIR_SHARE, "weight.a=3, weight.b=1");
  for (int64_t id = 1; id <= 6; ++id) d.arrive({.id = id, .tenant = "a", .max_output = 12});
  for (int64_t id = 11; id <= 16; ++id) d.arrive({.id = id, .tenant = "b", .max_output = 12});
  // Each pick charges 12 tokens / weight: a +4, b +12; ties go to the earlier head.
  // a1(a=4) b11(b=12) a2(8) a3(12) a4(tie 12:12, a earlier; 16) b12(24) a5(20) a6(24).
  BOOST_TEST(d.rank(0, 8) == (ids{1, 11, 2, 3, 4, 12, 5, 6}));
}

BOOST_AUTO_TEST_CASE(fair_share_serves_tokens_in_weight_ratio) {
  // Four slots, both tenants always backlogged, every request 12 tokens: the tokens each
  // tenant is served come out 3:1.
  driver d(TROUPE_POLICY_FAIR_SHARE, "weight.a=3,weight.b=1");
  int64_t next = 1;
  std::map<int64_t, std::string> tenant;
  std::map<int64_t, int32_t> running;  // id -> tokens
  auto add = [&](const std::string& t) {
    tenant[next] = t;
    d.arrive({.id = next, .tenant = t, .max_output = 12});
    ++next;
  };
  for (int i = 0; i < 10; ++i) add("a"), add("b");
  std::map<std::string, int64_t> tokens;
  for (int step = 0; step < 3000; ++step) {
    for (int64_t id : d.rank(0, static_cast<uint32_t>(4 - running.size()))) d.run(id), running[id] = 0;
    for (auto it = running.begin(); it != running.end();) {
      d.produce(it->first);
      ++tokens[tenant[it->first]];
      if (++it->second == 12) {
        d.finish(it->first);
        add(tenant[it->first]);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }
  double ratio = double(tokens["a"]) / double(tokens["b"]);
  BOOST_TEST_MESSAGE("fair-share tokens a=" << tokens["a"] << " b=" << tokens["b"] << " ratio " << ratio);
  BOOST_TEST(ratio > 3 * 0.97);
  BOOST_TEST(ratio < 3 * 1.03);
}

BOOST_AUTO_TEST_CASE(fair_share_does_not_bank_idle_time) {
  driver d(TROUPE_POLICY_FAIR_SHARE, "weight.a=3");
  for (int64_t id = 1; id <= 5; ++id) d.arrive({.id = id, .tenant = "a", .max_output = 12});
  for (int64_t id : {1, 2}) {
    d.run(id);
    d.produce(id, 12);
    d.finish(id);
  }  // a has been served 24 tokens: counter 8
  // b (weight 1) arrives now and starts at the smallest active counter, 8, not at 0: it does
  // not get every slot. a3 (tie, earlier; a=12) b11 (b=20) a4 (16) a5 (20).
  for (int64_t id = 11; id <= 15; ++id) d.arrive({.id = id, .tenant = "b", .max_output = 12});
  BOOST_TEST(d.rank(0, 4) == (ids{3, 11, 4, 5}));
  d.run(3);
  d.run(11);
  d.produce(11, 6);  // b: 8 + 6 = 14 > a: 8
  BOOST_TEST(d.victim(0, {3, 11}) == 11);
  d.produce(3, 12);  // a: 8 + 4 = 12, still below b
  BOOST_TEST(d.victim(0, {3, 11}) == 11);
}

BOOST_AUTO_TEST_CASE(fair_share_rejects_bad_weights) {
  auto e = driver::create_error(TROUPE_POLICY_FAIR_SHARE, "weight.a=0");
  BOOST_TEST(contains(e, "config key 'weight.a' is '0'; expected a number in [0.000001, 1000000]"), e);
  e = driver::create_error(TROUPE_POLICY_FAIR_SHARE, "weigth.a=3");
  BOOST_TEST(contains(e, "unknown config key 'weigth.a'; expected default_weight, output_token_cost, "
                         "prompt_token_cost, weight.<name>"),
             e);
  e = driver::create_error(TROUPE_POLICY_FAIR_SHARE, "weight.a=3,weight.a=2");
  BOOST_TEST(contains(e, "config key 'weight.a' is given twice"), e);
}

// ---- shortest-first -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(shortest_first_orders_by_work_left) {
  driver d(TROUPE_POLICY_SHORTEST_FIRST);
  d.arrive({.id = 1, .prompt = 100, .max_output = 10});              // 100 + 10 = 110
  d.arrive({.id = 2, .prompt = 10, .max_output = 10});               // 20
  d.arrive({.id = 3, .prompt = 50, .max_output = 5, .cached = 40});  // 10 + 5 = 15
  BOOST_TEST(d.rank(0, 10) == (ids{3, 2, 1}));
  d.set_cached(1, 100);  // its whole prompt is cached now: 10
  BOOST_TEST(d.rank(0, 10) == (ids{1, 3, 2}));
  d.run(1);
  d.run(2);
  d.produce(1, 9);  // 1 decode token left
  BOOST_TEST(d.victim(0, {1, 2}) == 2);
}

BOOST_AUTO_TEST_CASE(shortest_first_guard_serves_the_starved_first) {
  driver d(TROUPE_POLICY_SHORTEST_FIRST, "max_wait_ms=1000");
  d.arrive({.id = 50, .arrival_ns = 0, .prompt = 1000, .max_output = 100});
  d.arrive({.id = 51, .arrival_ns = 500 * ms, .prompt = 5, .max_output = 5});
  d.arrive({.id = 52, .arrival_ns = 600 * ms, .prompt = 1, .max_output = 1});
  BOOST_TEST(d.rank(999 * ms, 10) == (ids{52, 51, 50}));
  BOOST_TEST(d.rank(1000 * ms, 10) == (ids{50, 52, 51}));
  BOOST_TEST(d.rank(1600 * ms, 10) == (ids{50, 51, 52}));  // all starved: oldest first
  BOOST_TEST(d.rank(1600 * ms, 1) == (ids{50}));
  driver off(TROUPE_POLICY_SHORTEST_FIRST, "max_wait_ms=0");
  off.arrive({.id = 50, .arrival_ns = 0, .prompt = 1000, .max_output = 100});
  off.arrive({.id = 51, .arrival_ns = 500 * ms, .prompt = 5, .max_output = 5});
  BOOST_TEST(off.rank(int64_t{1} << 60, 10) == (ids{51, 50}));
  auto e = driver::create_error(TROUPE_POLICY_SHORTEST_FIRST, "max_wait_ms=abc");
  BOOST_TEST(contains(e, "config key 'max_wait_ms' is 'abc'"), e);
}

// ---- cache-aware --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(cache_aware_prefers_the_longest_cached_prefix) {
  driver d(TROUPE_POLICY_CACHE_AWARE);
  d.arrive({.id = 1, .prompt = 200, .cached = 0});
  d.arrive({.id = 2, .prompt = 200, .cached = 64});
  d.arrive({.id = 3, .prompt = 200, .cached = 16});
  d.arrive({.id = 4, .prompt = 200, .cached = 64});
  BOOST_TEST(d.rank(0, 10) == (ids{2, 4, 3, 1}));
  d.set_cached(1, 128);  // another request filled the cache with 1's prefix
  BOOST_TEST(d.rank(0, 10) == (ids{1, 2, 4, 3}));
  for (int64_t id : {1, 2, 3, 4}) d.run(id);
  BOOST_TEST(d.victim(0, {2, 4, 1}) == 4);  // the latest arrival
}

BOOST_AUTO_TEST_CASE(cache_aware_guard_serves_the_starved_first) {
  driver d(TROUPE_POLICY_CACHE_AWARE, "max_wait_ms=1000");
  d.arrive({.id = 10, .arrival_ns = 0, .cached = 0});
  d.arrive({.id = 11, .arrival_ns = 600 * ms, .cached = 100});
  BOOST_TEST(d.rank(999 * ms, 10) == (ids{11, 10}));
  BOOST_TEST(d.rank(1000 * ms, 10) == (ids{10, 11}));
}
