// Spawn functions of the serving actors. Only actors/*.cpp include CAF: this header forward-
// declares what callers need.
#pragma once

#include <caf/fwd.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/context.hpp"

namespace troupe::actors {

struct prefix_cache_handles;

// The continuous-batching loop: owns sched::scheduler (and with it the KV-block allocator) and
// one step in flight on the executor. Never blocks: steps, tokenization, sockets and Redis are
// other actors' work. `prefix`: the prefix-cache actors (null without Redis).
caf::actor spawn_scheduler(caf::local_actor* parent, context_ptr ctx, std::vector<caf::actor> workers,
                           caf::actor executor, caf::actor supervisor,
                           std::shared_ptr<const prefix_cache_handles> prefix = nullptr);

// One per device: runs each planned step on the engine on its own thread (detached actor).
caf::actor spawn_shard_executor(caf::local_actor* parent, context_ptr ctx);

// Text -> ids and ids -> streamed text for the requests pinned to it (rid % pool size).
caf::actor spawn_tokenizer_worker(caf::local_actor* parent, context_ptr ctx, int32_t index, caf::actor scheduler,
                                  caf::actor gateway);

}  // namespace troupe::actors
