// The prefix-cache actors (see prefix_cache_actor.hpp): thin shells over prefix::remote_cache.
#include "actors/prefix_cache_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <cstdio>

#include "actors/prefix_cache_messages.hpp"

namespace troupe::actors {

namespace {

using clock = std::chrono::steady_clock;

// One connection and its remote_cache, owned by one actor's thread.
struct redis_side {
  prefix::redis_kv_store store;
  prefix::remote_cache cache;
  std::shared_ptr<prefix::cost_model> cost;
  std::shared_ptr<prefix::prefix_metrics> metrics;
  redis_side(const prefix_cache_config& cfg, std::shared_ptr<prefix::cost_model> c,
             std::shared_ptr<prefix::prefix_metrics> m)
      : store(cfg.redis),
        cache(store, prefix::block_codec(cfg.identity.key_component(), cfg.layout), cfg.identity, cfg.remote, *c),
        cost(std::move(c)),
        metrics(std::move(m)) {}
  prefix::store_health health() const {
    auto c = store.counters();
    return {store.connected(), c.connects, c.connect_failures, c.disconnects, c.timeouts, c.error_replies};
  }
};

caf::behavior lookup_actor(caf::event_based_actor* self, std::shared_ptr<redis_side> side) {
  (void)self;
  // Say once at start whether Redis answers; serving goes on either way (local cache only).
  auto st = side->store.ping(clock::now() + std::chrono::milliseconds(500));
  if (st != prefix::store_status::ok)
    std::fprintf(stderr, "troupe serve: %s: %s; serving from the local prefix cache, retrying with back-off\n",
                 side->store.describe().c_str(), std::string(prefix::to_string(st)).c_str());
  side->metrics->set_fetch(side->cache.stats(), side->health());
  return {
      [=](prefix_lookup_msg& m) -> prefix_found_msg {
        prefix_found_msg r;
        r.seq_id = m.lookup.seq_id;
        // A look-up that waited in the mailbox past its deadline is answered at once: the
        // scheduler has given up on it already.
        if (clock::now() < m.deadline) {
          auto res = side->cache.fetch(m.lookup, m.deadline);
          r.found = std::move(res.blocks);
          r.decision = res.decision;
        } else {
          r.decision = prefix::fetch_decision::unavailable;
        }
        side->metrics->set_fetch(side->cache.stats(), side->health());
        return r;
      },
  };
}

caf::behavior publisher_actor(caf::event_based_actor* self, std::shared_ptr<redis_side> side,
                              std::shared_ptr<std::atomic<int64_t>> queued) {
  (void)self;
  return {
      [=](prefix_publish_msg& m) {
        side->cache.publish(*m.blocks, clock::now() + side->cache.options().publish_budget);
        *queued -= static_cast<int64_t>(m.bytes);
        side->metrics->set_publish(side->cache.stats(), side->health());
      },
  };
}

}  // namespace

prefix_cache_handles spawn_prefix_cache(caf::local_actor* parent, const prefix_cache_config& cfg,
                                        std::shared_ptr<prefix::cost_model> cost,
                                        std::shared_ptr<prefix::prefix_metrics> metrics) {
  prefix_cache_handles h;
  h.queued_bytes = std::make_shared<std::atomic<int64_t>>(0);
  h.max_queued_bytes = cfg.max_publish_queue_bytes;
  // Both sides are built here, so a bad identity throws to the caller rather than in an actor.
  auto fetch_side = std::make_shared<redis_side>(cfg, cost, metrics);
  auto publish_side = std::make_shared<redis_side>(cfg, cost, metrics);
  h.lookup = parent->spawn<caf::detached>(lookup_actor, fetch_side);
  h.publisher = parent->spawn<caf::detached>(publisher_actor, publish_side, h.queued_bytes);
  return h;
}

void publish_blocks(const prefix_cache_handles& h, std::vector<prefix::saved_block> blocks, prefix::prefix_metrics& metrics) {
  if (blocks.empty()) return;
  size_t bytes = 0;
  for (const auto& b : blocks) bytes += b.payload.size();
  if (!h.publisher || *h.queued_bytes + static_cast<int64_t>(bytes) > static_cast<int64_t>(h.max_queued_bytes)) {
    metrics.add_publish_dropped(static_cast<int64_t>(blocks.size()));
    return;
  }
  *h.queued_bytes += static_cast<int64_t>(bytes);
  caf::anon_send(h.publisher, prefix_publish_msg{std::make_shared<std::vector<prefix::saved_block>>(std::move(blocks)), bytes});
}

}  // namespace troupe::actors
