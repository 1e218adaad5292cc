// The prefix-cache actors against real redis-servers: look-ups answered with checked blocks, or
// by their deadline when Redis is down or hung; publishing writes blocks and drops them (counted)
// when its queue is full.
#define BOOST_TEST_MODULE troupe_prefix_actor
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>
#include <thread>

#include "actors/prefix_cache_actor.hpp"
#include "actors/prefix_cache_messages.hpp"
#include "tests/runtime/prefix/print.hpp"
#include "tests/runtime/prefix/redis_server.hpp"

using namespace troupe;
using namespace troupe::actors;
using namespace std::chrono_literals;
using troupe::testing::redis_server;

namespace {

struct fixture {
  prefix::cache_identity id;
  prefix::kv_layout layout;
  std::vector<int32_t> tokens;
  std::vector<prefix::block_meta> metas;

  fixture() {
    id.model_fingerprint = "actor-test";
    id.block_size = 4;
    layout.num_layers = 2;
    layout.block_size = 4;
    layout.n_kv_heads = 2;
    layout.head_dim = 8;
    for (int i = 0; i < 24; ++i) tokens.push_back(100 + i);
    std::vector<prefix::block_hash> hashes;
    prefix::extend_block_hashes(hashes, prefix::root_hash(id), tokens, 4);
    for (size_t b = 0; b < hashes.size(); ++b)
      metas.push_back({hashes[b], b == 0 ? prefix::root_hash(id) : hashes[b - 1],
                       std::vector<int32_t>(tokens.begin() + static_cast<long>(4 * b), tokens.begin() + static_cast<long>(4 * b + 4))});
  }
  prefix_cache_config config(const std::string& url) const {
    prefix_cache_config c;
    c.redis.url = prefix::parse_redis_url(url);
    c.redis.backoff_initial = 50ms;
    c.redis.backoff_max = 200ms;
    c.identity = id;
    c.layout = layout;
    return c;
  }
  std::vector<prefix::saved_block> blocks(size_t n) const {
    std::vector<prefix::saved_block> out;
    for (size_t b = 0; b < n; ++b) out.push_back({metas[b], std::string(layout.payload_bytes(), static_cast<char>('a' + b))});
    return out;
  }
  prefix::remote_lookup lookup(int64_t seq) const {
    return {seq, 0, metas};
  }
};

struct actor_env {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<prefix::cost_model> cost = std::make_shared<prefix::cost_model>();
  std::shared_ptr<prefix::prefix_metrics> metrics = std::make_shared<prefix::prefix_metrics>(cost);
  prefix_cache_handles h;
  actor_env(const prefix_cache_config& c) {
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    caf::scoped_actor self{*sys};
    h = spawn_prefix_cache(self.ptr(), c, cost, metrics);
  }
  ~actor_env() {
    caf::anon_send_exit(h.lookup, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(h.publisher, caf::exit_reason::user_shutdown);
  }
  // Sends a look-up and waits for the answer; returns it and how long it took.
  std::pair<prefix_found_msg, double> ask(prefix::remote_lookup q, std::chrono::milliseconds budget) {
    caf::scoped_actor self{*sys};
    auto t0 = std::chrono::steady_clock::now();
    prefix_found_msg got;
    self->request(h.lookup, std::chrono::seconds(30), prefix_lookup_msg{std::move(q), t0 + budget})
        .receive([&](prefix_found_msg& m) { got = std::move(m); },
                 [&](caf::error& e) { BOOST_FAIL("look-up failed: " << sys->render(e)); });
    return {std::move(got), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()};
  }
  void wait_published(size_t n) {
    for (int i = 0; i < 300 && metrics->publish().blocks_written + metrics->publish().blocks_present < static_cast<int64_t>(n); ++i)
      std::this_thread::sleep_for(10ms);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(prefix_cache_actor, fixture)

BOOST_AUTO_TEST_CASE(published_blocks_are_found_by_a_lookup) {
  redis_server srv;
  actor_env env(config(srv.url()));
  publish_blocks(env.h, blocks(4), *env.metrics);
  env.wait_published(4);
  BOOST_TEST(env.metrics->publish().blocks_written == 4);
  BOOST_TEST(*env.h.queued_bytes == 0);
  auto [found, ms] = env.ask(lookup(7), 2000ms);
  BOOST_TEST(found.seq_id == 7);
  BOOST_TEST((found.decision == prefix::fetch_decision::fetch));
  BOOST_REQUIRE(found.found.payloads.size() == 4u);  // blocks 4 and 5 were never published
  BOOST_TEST(found.found.payloads[2].bytes == std::string(layout.payload_bytes(), 'c'));
  BOOST_TEST(env.metrics->fetch().blocks_fetched == 4);
  std::string text;
  env.metrics->render(text, "model_name=\"m\"");
  BOOST_TEST(text.find("troupe:prefix_cache_remote_lookups_total{model_name=\"m\",decision=\"fetch\"} 1\n") != std::string::npos);
  BOOST_TEST(text.find("troupe:prefix_cache_redis_up{model_name=\"m\"} 1\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(redis_down_is_answered_at_once) {
  auto c = config("unix:///tmp/troupe-no-such-dir/redis.sock");
  actor_env env(c);
  auto [found, ms] = env.ask(lookup(1), 1000ms);
  BOOST_TEST((found.decision == prefix::fetch_decision::unavailable));
  BOOST_TEST(found.found.payloads.empty());
  BOOST_TEST(ms < 100.0);
  publish_blocks(env.h, blocks(2), *env.metrics);  // written nowhere, counted as a failure
  for (int i = 0; i < 100 && env.metrics->publish().store_failures == 0; ++i) std::this_thread::sleep_for(10ms);
  BOOST_TEST(env.metrics->publish().store_failures == 1);
}

BOOST_AUTO_TEST_CASE(a_hung_redis_is_answered_by_the_deadline) {
  redis_server srv;
  auto c = config(srv.url());
  // A back-off long enough that the second look-up below falls inside it on a loaded machine too
  // (at 50 ms, then 200 ms, a slow second ask could find it over and wait for Redis again). Each
  // bound sits far from what a broken actor would take (a hung Redis never answers; a look-up
  // during the back-off that waited would take its whole 1 s deadline), so that a loaded machine's
  // slack cannot fail it.
  c.redis.backoff_initial = 1000ms;
  c.redis.backoff_max = 1000ms;
  actor_env env(c);
  publish_blocks(env.h, blocks(3), *env.metrics);
  env.wait_published(3);
  srv.pause();
  auto [found, ms] = env.ask(lookup(2), 150ms);
  BOOST_TEST((found.decision == prefix::fetch_decision::unavailable));
  BOOST_TEST(ms < 600.0);
  // A second look-up during the back-off is answered at once, not at its deadline.
  auto [again, ms2] = env.ask(lookup(3), 1000ms);
  BOOST_TEST((again.decision == prefix::fetch_decision::unavailable));
  BOOST_TEST(ms2 < 400.0);
  srv.resume();
  std::this_thread::sleep_for(1200ms);  // past the back-off
  auto [back, ms3] = env.ask(lookup(4), 2000ms);
  BOOST_TEST((back.decision == prefix::fetch_decision::fetch));
  BOOST_TEST(back.found.payloads.size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_full_publish_queue_drops_and_counts) {
  redis_server srv;
  auto c = config(srv.url());
  c.max_publish_queue_bytes = layout.payload_bytes() * 2;
  actor_env env(c);
  srv.pause();  // the publisher blocks on its first batch; the queue fills up
  publish_blocks(env.h, blocks(2), *env.metrics);
  publish_blocks(env.h, blocks(1), *env.metrics);
  BOOST_TEST(env.metrics->publish_dropped() == 1);
  srv.resume();
}

BOOST_AUTO_TEST_SUITE_END()
