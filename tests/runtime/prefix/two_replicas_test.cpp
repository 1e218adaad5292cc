// The check, end to end: two `troupe serve` processes share one redis-server; replica B
// answers a prompt whose prefix replica A computed with exactly the tokens of a cold run, and its
// usage shows the cached tokens; a replica with --no-prefix-cache, one whose Redis is down, one
// whose Redis is killed mid-run (then restarted) and one whose Redis hangs answer exactly too,
// the last within the look-up budget.
#define BOOST_TEST_MODULE troupe_prefix_replicas
#include <boost/test/unit_test.hpp>

#include <random>
#include <thread>

#include "actors/server.hpp"
#include "examples/cpp/troupe_client.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"
#include "tests/runtime/prefix/redis_server.hpp"
#include "tests/runtime/prefix/replica_checks.hpp"
#include "tests/runtime/prefix/replica_process.hpp"

using namespace troupe;
using troupe::testing::redis_server;
using troupe::testing::replica_process;
using namespace troupe::testing;

namespace {

const std::string& model_dir = troupe::testing::replica_model_dir;

std::vector<std::string> flags(std::vector<std::string> extra = {}) {
  std::vector<std::string> f = {"--model", model_dir, "--num-kv-blocks", "128", "--max-model-len", "512"};
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

}  // namespace

BOOST_AUTO_TEST_CASE(replica_b_reuses_what_replica_a_computed) {
  redis_server redis;
  std::mt19937 rng(3);
  auto prefix = random_ids(rng, 200);
  auto prompt_a = prefix, prompt_b = prefix;
  auto tail_a = random_ids(rng, 9), tail_b = random_ids(rng, 20);
  prompt_a.insert(prompt_a.end(), tail_a.begin(), tail_a.end());
  prompt_b.insert(prompt_b.end(), tail_b.begin(), tail_b.end());

  replica_process a(flags({"--redis", redis.url()}));
  replica_process b(flags({"--redis", redis.url()}));
  BOOST_TEST_MESSAGE(a.banner());
  {
    client::client ca("127.0.0.1", a.port());
    auto done = ca.complete(greedy("a1", prompt_a, 8));
    BOOST_TEST(done.ids == cold(prompt_a, 8), boost::test_tools::per_element());
    BOOST_TEST(done.done.usage.cached_prompt_tokens == 0);
  }
  // A publishes in the background: wait until the 13 full prompt blocks are in Redis.
  for (int i = 0; i < 500 && redis.command({"DBSIZE"})->integer < 13; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(redis.command({"DBSIZE"})->integer >= 13);

  client::client cb("127.0.0.1", b.port());
  auto done = cb.complete(greedy("b1", prompt_b, 8));
  BOOST_TEST(done.ids == cold(prompt_b, 8), boost::test_tools::per_element());
  // 200 shared tokens: 12 full blocks of 16 came from Redis (block 13 differs after token 200).
  BOOST_TEST(done.done.usage.cached_prompt_tokens == 192);
  BOOST_TEST(metric(b.metrics_port(), "prefix_cache_remote_hit_tokens_total") == 192.0);
  BOOST_TEST(metric(b.metrics_port(), "prefix_cache_remote_lookups_total") >= 1.0);
  // Again on B: now from its own pool.
  auto again = cb.complete(greedy("b2", prompt_b, 8));
  BOOST_TEST(again.ids == done.ids, boost::test_tools::per_element());
  BOOST_TEST(again.done.usage.cached_prompt_tokens == 208);  // (220 - 1) / 16 = 13 blocks
  BOOST_TEST(metric(b.metrics_port(), "prefix_cache_hits_total") == 400.0);
  BOOST_TEST(metric(b.metrics_port(), "prefix_cache_queries_total") == 440.0);
}

BOOST_AUTO_TEST_CASE(without_the_cache_or_without_redis_outputs_are_the_same) {
  std::mt19937 rng(4);
  auto prompt = random_ids(rng, 100);
  replica_process off(flags({"--no-prefix-cache"}));
  replica_process nored(flags({"--redis", "unix:///tmp/troupe-no-such-dir/redis.sock"}));
  for (auto* r : {&off, &nored}) {
    client::client c("127.0.0.1", r->port());
    auto first = c.complete(greedy("x1", prompt, 6));
    auto second = c.complete(greedy("x2", prompt, 6));
    BOOST_TEST(first.ids == cold(prompt, 6), boost::test_tools::per_element());
    BOOST_TEST(second.ids == first.ids, boost::test_tools::per_element());
    BOOST_TEST(second.done.usage.cached_prompt_tokens == (r == &off ? 0 : 96));
  }
  BOOST_TEST(metric(nored.metrics_port(), "prefix_cache_redis_up") == 0.0);
  BOOST_TEST(metric(off.metrics_port(), "prefix_cache_queries_total") <= 0.0);
}

BOOST_AUTO_TEST_CASE(redis_killed_mid_run_then_restarted) {
  redis_server redis;
  std::mt19937 rng(5);
  auto p1 = random_ids(rng, 120);
  replica_process a(flags({"--redis", redis.url(), "--set", "prefix_cache.fetch_budget_ms=2000", "--set",
                           "prefix_cache.backoff_max_ms=200"}));
  client::client ca("127.0.0.1", a.port());
  auto d1 = ca.complete(greedy("k1", p1, 5));
  BOOST_TEST(d1.ids == cold(p1, 5), boost::test_tools::per_element());
  redis.stop(SIGKILL);
  // A new prompt's look-up meets the dead Redis: answered at once, the request is computed.
  auto p2 = random_ids(rng, 90);
  auto d2 = ca.complete(greedy("k2", p2, 5));
  BOOST_TEST(d2.ids == cold(p2, 5), boost::test_tools::per_element());
  BOOST_TEST(d2.done.timings.queue_ms < 1000.0);  // not the 2 s budget
  // The local cache still serves.
  auto d3 = ca.complete(greedy("k3", p1, 5));
  BOOST_TEST(d3.ids == d1.ids, boost::test_tools::per_element());
  BOOST_TEST(d3.done.usage.cached_prompt_tokens == 112);  // (120 - 1) / 16 = 7 blocks
  // Restarted (empty): after its back-off the replica reconnects and publishes again.
  redis.start();
  bool published = false;
  for (int i = 0; i < 40 && !published; ++i) {
    auto p = random_ids(rng, 40);
    auto d = ca.complete(greedy("r" + std::to_string(i), p, 2));
    BOOST_TEST(d.ids == cold(p, 2), boost::test_tools::per_element());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    published = redis.command({"DBSIZE"})->integer > 0;
  }
  BOOST_TEST(published);
}

BOOST_AUTO_TEST_CASE(a_hung_redis_delays_a_request_by_at_most_the_budget) {
  redis_server redis;
  std::mt19937 rng(6);
  replica_process a(flags({"--redis", redis.url(), "--set", "prefix_cache.fetch_budget_ms=250"}));
  client::client ca("127.0.0.1", a.port());
  auto warm = random_ids(rng, 40);
  ca.complete(greedy("w", warm, 2));  // the look-up connection is up
  redis.pause();                      // SIGSTOP: connections stay open, nothing answers
  auto p = random_ids(rng, 100);
  auto d = ca.complete(greedy("h", p, 4));
  BOOST_TEST(d.ids == cold(p, 4), boost::test_tools::per_element());
  BOOST_TEST(d.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(d.done.timings.queue_ms < 2 * 250.0);  // the budget, plus a loaded machine's slack
  // Still hung: the next one is bounded the same way (answered at once while backing off).
  auto q = random_ids(rng, 100);
  auto e = ca.complete(greedy("h2", q, 4));
  BOOST_TEST(e.ids == cold(q, 4), boost::test_tools::per_element());
  BOOST_TEST(e.done.timings.queue_ms < 2 * 250.0);
  redis.resume();
}

// The supervisor restarts the prefix-cache actors when one fails and hands them to the
// scheduler: after the restart, replica B (in process here, for the test hook) still fetches
// what replica A published.
BOOST_AUTO_TEST_CASE(restarted_prefix_cache_actors_still_fetch) {
  redis_server redis;
  std::mt19937 rng(7);
  auto prefix = random_ids(rng, 200);
  auto prompt_a = prefix, prompt_b = prefix;
  auto tail_a = random_ids(rng, 9), tail_b = random_ids(rng, 20);
  prompt_a.insert(prompt_a.end(), tail_a.begin(), tail_a.end());
  prompt_b.insert(prompt_b.end(), tail_b.begin(), tail_b.end());
  actors::server_options o;
  o.model_dir = model_dir;
  o.cfg.port = 0;
  o.cfg.metrics_port = -1;
  o.cfg.http_port = -1;
  o.cfg.num_kv_blocks = 128;
  o.cfg.max_model_len = 512;
  o.cfg.shutdown_grace_ms = 0;
  o.cfg.redis_url = redis.url();
  actors::server a(o), b(o);
  client::client ca("127.0.0.1", a.port());
  BOOST_TEST(ca.complete(greedy("a1", prompt_a, 4)).ids == cold(prompt_a, 4), boost::test_tools::per_element());
  for (int i = 0; i < 500 && redis.command({"DBSIZE"})->integer < 13; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  b.kill_prefix_cache();
  for (int i = 0; i < 500 && b.restarts() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_REQUIRE(b.restarts() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the scheduler has the new handles
  client::client cb("127.0.0.1", b.port());
  auto done = cb.complete(greedy("b1", prompt_b, 4));
  BOOST_TEST(done.ids == cold(prompt_b, 4), boost::test_tools::per_element());
  BOOST_TEST(done.done.usage.cached_prompt_tokens == 192);
}
