// Messages of the prefix-cache actors (local only; payloads behind shared_ptr or views kept alive
// by their owners, so no send copies KV bytes).
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "runtime/prefix/prefix_cache.hpp"
#include "runtime/prefix/remote_cache.hpp"

namespace troupe::actors {

// scheduler -> prefix-cache look-up actor; answered with prefix_found_msg by `deadline`.
struct prefix_lookup_msg {
  prefix::remote_lookup lookup;
  std::chrono::steady_clock::time_point deadline;
};
struct prefix_found_msg {
  int64_t seq_id = 0;
  prefix::remote_blocks found;
  prefix::fetch_decision decision = prefix::fetch_decision::not_found;
};
// scheduler -> prefix-cache publisher: blocks the last step filled, to write if Redis lacks them.
struct prefix_publish_msg {
  std::shared_ptr<std::vector<prefix::saved_block>> blocks;
  size_t bytes = 0;  // payload bytes, returned to the queue budget once written (or dropped)
};

struct prefix_cache_handles;
// supervisor -> scheduler: the prefix-cache actors were restarted (null: none).
struct prefix_changed {
  std::shared_ptr<const prefix_cache_handles> handles;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::prefix_lookup_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::prefix_found_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::prefix_publish_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::prefix_changed)
