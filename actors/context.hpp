// What every serving actor shares, read-only after start: the config, the loaded model and
// tokenizer, the derived scheduler settings, and the metrics registry (thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/plugin_host/policy_control.hpp"
#include "runtime/prefix/block_codec.hpp"
#include "runtime/prefix/cost_model.hpp"
#include "runtime/prefix/prefix_metrics.hpp"
#include "runtime/prefix/redis_kv_store.hpp"
#include "runtime/prefix/remote_cache.hpp"
#include "runtime/sched/scheduler.hpp"
#include "runtime/serve/metrics.hpp"
#include "runtime/serve/request_builder.hpp"
#include "runtime/serve/server_config.hpp"
#include "runtime/wire/conversation_store.hpp"
#include "runtime/wire/response_store.hpp"
#include "runtime/serve/batch_executor.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::actors {

// Prefix caching shared through Redis (docs/prefix_cache.md): what the supervisor needs to spawn
// the prefix-cache actors. Local prefix caching is sched.enable_prefix_caching alone.
struct prefix_settings {
  bool remote = false;  // a Redis URL is configured
  prefix::redis_options redis;
  prefix::remote_options remote_opts;
  prefix::cache_identity identity;  // block_size is the pool's
  prefix::kv_layout layout;         // the executor's pool
  size_t max_publish_queue_bytes = 0;
};

// The shard executor's batch executor: its step backend (and draft model, if any) with their KV
// pools. The first is made at start-up (make_context), so that a device or memory failure stops
// the start with its message rather than a restart loop; the executor takes it when it first
// starts and makes a fresh one (clean pools) when it is restarted.
class executor_source {
 public:
  using factory = std::function<std::unique_ptr<serve::batch_executor>()>;
  explicit executor_source(factory make) : make_(std::move(make)), first_(make_()) {}
  std::unique_ptr<serve::batch_executor> take() {
    std::lock_guard lock(mu_);
    return first_ ? std::move(first_) : make_();
  }

 private:
  factory make_;
  std::mutex mu_;
  std::unique_ptr<serve::batch_executor> first_;
};

struct server_context {
  serve::server_config cfg;
  std::shared_ptr<const checkpoint> ckpt;
  std::unique_ptr<tokenizer> tok;  // null: ids-only model
  serve::model_facts facts;        // facts.tok == tok.get()
  sched::sched_config sched;
  int32_t num_blocks = 0;
  dtype kv_type = dtype::f32;      // the executor's KV pool (kv_cache.kv_cache_dtype)
  std::shared_ptr<executor_source> executors;  // the shard executor's engine (model.device)
  // Speculative decoding's draft model (speculative.model); null: none.
  std::shared_ptr<const checkpoint> draft_ckpt;
  std::shared_ptr<serve::metrics> metrics;
  // The scheduling policy: loaded by the scheduler actor, swapped by set_policy (its thread only).
  std::shared_ptr<plugin_host::policy_control> policy;
  // Prefix caching: metrics (null when off; thread-safe, rendered with the server's) and, with
  // Redis, the fetch-or-recompute cost model the scheduler feeds and the look-up actor reads.
  prefix_settings prefix;
  std::shared_ptr<prefix::prefix_metrics> prefix_metrics;
  std::shared_ptr<prefix::cost_model> prefix_cost;
  // The Responses API's stored responses (server.responses_store_bytes; null when 0). Here rather
  // than in the gateway's state so that a restarted gateway still finds them.
  std::shared_ptr<wire::openai::response_store> responses;
  // OpenAI's conversations (server.conversations_store_bytes; null when 0), here for the same reason.
  std::shared_ptr<wire::openai::conversation_store> conversations;
  // Where the stats line and the request log go (server_options::log_sink; stderr by default).
  std::function<void(const std::string&)> log;
};

using context_ptr = std::shared_ptr<const server_context>;

}  // namespace troupe::actors
