// The prefix-cache actors: the Redis side of prefix caching. Two detached actors (own threads,
// since hiredis blocks), each with its own connection: the look-up actor answers a scheduler's
// look-up within its deadline (EXISTS, cost model, GET, checks), and the publisher writes the
// blocks each step filled, so a slow publish never delays a look-up. Included by actors/*.cpp only.
#pragma once

#include <atomic>
#include <caf/actor.hpp>
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/prefix/block_codec.hpp"
#include "runtime/prefix/cost_model.hpp"
#include "runtime/prefix/prefix_cache.hpp"
#include "runtime/prefix/prefix_metrics.hpp"
#include "runtime/prefix/redis_kv_store.hpp"
#include "runtime/prefix/remote_cache.hpp"

namespace troupe::actors {

struct prefix_cache_config {
  prefix::redis_options redis;
  prefix::remote_options remote;
  prefix::cache_identity identity;
  prefix::kv_layout layout;
  size_t max_publish_queue_bytes = size_t{256} << 20;  // beyond this, filled blocks are not published
};

struct prefix_cache_handles {
  caf::actor lookup;
  caf::actor publisher;
  std::shared_ptr<std::atomic<int64_t>> queued_bytes;  // publish payload bytes in flight
  size_t max_queued_bytes = 0;
};

// Spawns both actors (they connect lazily; a Redis that is down is retried with back-off).
// Throws troupe::error(invalid_argument) for a bad identity or namespace.
prefix_cache_handles spawn_prefix_cache(caf::local_actor* parent, const prefix_cache_config& cfg,
                                        std::shared_ptr<prefix::cost_model> cost,
                                        std::shared_ptr<prefix::prefix_metrics> metrics);

// Hands the step's filled blocks to the publisher, or drops them (counted in metrics) when the
// publish queue is full: Redis falling behind must not grow this process's memory.
void publish_blocks(const prefix_cache_handles& h, std::vector<prefix::saved_block> blocks, prefix::prefix_metrics& metrics);

}  // namespace troupe::actors
