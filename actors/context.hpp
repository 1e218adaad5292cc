// What every serving actor shares, read-only after start: the config, the loaded model and
// tokenizer, the derived scheduler settings, and the metrics registry (thread-safe).
#pragma once

#include <memory>
#include <string>

#include "runtime/model/checkpoint.hpp"
#include "runtime/plugin_host/policy_control.hpp"
#include "runtime/sched/scheduler.hpp"
#include "runtime/serve/metrics.hpp"
#include "runtime/serve/request_builder.hpp"
#include "runtime/serve/server_config.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::actors {

struct server_context {
  serve::server_config cfg;
  std::shared_ptr<const checkpoint> ckpt;
  std::unique_ptr<tokenizer> tok;  // null: ids-only model
  serve::model_facts facts;        // facts.tok == tok.get()
  sched::sched_config sched;
  int32_t num_blocks = 0;
  std::shared_ptr<serve::metrics> metrics;
  // The scheduling policy: loaded by the scheduler actor, swapped by set_policy (its thread only).
  std::shared_ptr<plugin_host::policy_control> policy;
};

using context_ptr = std::shared_ptr<const server_context>;

}  // namespace troupe::actors
