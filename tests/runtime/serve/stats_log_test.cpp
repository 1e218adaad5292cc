// vLLM's periodic stats line: rates over the interval, the gauges as sampled, the prefix cache's
// hit rate over the interval's look-ups, and quiet while the server idles.
#include <boost/test/unit_test.hpp>

#include "runtime/serve/stats_log.hpp"

using troupe::serve::stats_log;
using troupe::serve::stats_sample;

namespace {
stats_sample at(double seconds, int64_t prompt, int64_t generated, int64_t running = 0, int64_t waiting = 0) {
  stats_sample s;
  s.seconds = seconds;
  s.prompt_tokens = prompt;
  s.generation_tokens = generated;
  s.running = running;
  s.waiting = waiting;
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(stats_log_line)

BOOST_AUTO_TEST_CASE(rates_over_the_interval_and_the_gauges_now) {
  stats_log log;
  BOOST_TEST(!log.next(at(0, 0, 0)).has_value());  // nothing to compare with yet
  auto s = at(10, 5000, 960, 16, 2);
  s.kv_cache_usage = 0.3125;
  s.preemptions = 3;
  const auto line = log.next(s);
  BOOST_TEST_REQUIRE(line.has_value());
  BOOST_TEST(*line ==
             "Avg prompt throughput: 500.0 tokens/s, Avg generation throughput: 96.0 tokens/s, Running: 16 reqs, "
             "Waiting: 2 reqs, KV cache usage: 31.2%, Preemptions: 3");
  // The next interval counts from this sample, not from the start.
  const auto next = log.next(at(20, 5000, 1960, 16, 0));
  BOOST_TEST_REQUIRE(next.has_value());
  BOOST_TEST(next->find("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 100.0 tokens/s") == 0u, *next);
  BOOST_TEST(next->find("Preemptions") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(quiet_while_idle_after_one_line_that_says_so) {
  stats_log log;
  log.next(at(0, 0, 0));
  BOOST_TEST(!log.next(at(10, 0, 0)).has_value());  // idle since start: nothing
  BOOST_TEST(log.next(at(20, 100, 10, 1)).has_value());
  const auto ended = log.next(at(30, 100, 10));  // the load ended: one line says so
  BOOST_TEST_REQUIRE(ended.has_value());
  BOOST_TEST(ended->find("Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs") != std::string::npos);
  BOOST_TEST(!log.next(at(40, 100, 10)).has_value());
  BOOST_TEST(!log.next(at(50, 100, 10)).has_value());
  // A request waiting (or running a long prefill, no token yet) is activity.
  BOOST_TEST(log.next(at(60, 100, 10, 0, 1)).has_value());
}

BOOST_AUTO_TEST_CASE(prefix_cache_hit_rate_over_the_intervals_lookups) {
  stats_log log;
  auto s = at(0, 0, 0);
  s.prefix_caching = true;
  log.next(s);
  s = at(10, 400, 10, 1);
  s.prefix_caching = true;
  s.prefix_query_tokens = 400;
  s.prefix_hit_tokens = 100;
  auto line = log.next(s);
  BOOST_TEST_REQUIRE(line.has_value());
  BOOST_TEST(line->find(", Prefix cache hit rate: 25.0%") != std::string::npos, *line);
  s.seconds = 20;
  s.prefix_query_tokens = 500;
  s.prefix_hit_tokens = 200;  // this interval: 100 of 100
  line = log.next(s);
  BOOST_TEST(line->find(", Prefix cache hit rate: 100.0%") != std::string::npos, *line);
  s.seconds = 30;  // no look-ups in the interval: the rate since start
  line = log.next(s);
  BOOST_TEST(line->find(", Prefix cache hit rate: 40.0%") != std::string::npos, *line);
  // Without prefix caching, no rate at all.
  stats_log off;
  off.next(at(0, 0, 0));
  BOOST_TEST(off.next(at(1, 1, 1, 1))->find("Prefix") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
