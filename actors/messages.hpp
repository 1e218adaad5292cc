// The messages the serving actors exchange (all local: plain structs whitelisted for CAF, large
// payloads behind shared_ptr so a send never copies a prompt). Every per-request message carries
// the request's server-wide id `rid`, which is also its sequence id in the scheduler.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sched/scheduler.hpp"
#include "runtime/serve/batch_executor.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::actors {

using clock = std::chrono::steady_clock;

// ---- atoms (at most 10 characters) -----------------------------------------------------------
using drain_atom = caf::atom_constant<caf::atom("drain")>;       // stop accepting; finish or cancel
using drained_atom = caf::atom_constant<caf::atom("drained")>;   // scheduler -> supervisor: all done
using tick_atom = caf::atom_constant<caf::atom("tick")>;         // scheduler: deadlines / drain timer
using idle_sweep_atom = caf::atom_constant<caf::atom("idlesweep")>;  // gateway: close idle connections
using kill_exec_atom = caf::atom_constant<caf::atom("killexec")>;  // tests: fail the executor
using kill_sched_atom = caf::atom_constant<caf::atom("killsched")>;  // tests: fail the scheduler
using kill_worker_atom = caf::atom_constant<caf::atom("killworker")>;  // tests: fail a tokenizer worker
using kill_prefix_atom = caf::atom_constant<caf::atom("killprefix")>;  // tests: fail the prefix look-up actor
using restarts_atom = caf::atom_constant<caf::atom("restarts")>;  // supervisor: restarts so far

// ---- gateway -> tokenizer worker -------------------------------------------------------------
struct generate_msg {
  int64_t rid = 0;
  std::shared_ptr<const wire::generate_request> req;
  clock::time_point received;
};
struct tokenize_msg {
  int64_t rid = 0;
  std::shared_ptr<const wire::tokenize_request> req;
};
// Gateway -> worker -> scheduler: a client cancel or disconnect. Routed through the request's
// worker so that it can never overtake the request's own submit.
struct cancel_msg {
  int64_t rid = 0;
};

// ---- tokenizer worker -> scheduler -----------------------------------------------------------
struct submit_msg {
  int64_t rid = 0;
  int32_t worker = 0;
  sched::request_spec spec;  // spec.seq_id == rid
  std::shared_ptr<serve::seq_sampling> sampling;
  clock::time_point received;
};
// The worker's detokenizer matched a stop string: the request is over (the worker already sent done).
struct stop_msg {
  int64_t rid = 0;
};

// ---- scheduler -> tokenizer worker -----------------------------------------------------------
struct seq_update {
  int64_t rid = 0;
  int32_t token = -1;                               // -1: none this step
  std::optional<token_logprobs> logprobs;           // of `token`, for requests that asked
  std::vector<token_logprobs> prompt_logprobs;      // of the next prompt tokens (prompt_logprobs)
  std::optional<std::vector<float>> embedding;      // an embed request's input, computed
  std::optional<wire::finish_reason> finished;      // the sequence left the scheduler
  std::optional<wire::wire_error> error;            // with finished == error, or with rejected
  bool rejected = false;                            // refused at admission: answer with an error event
  std::optional<clock::time_point> first_scheduled; // for queue_ms
  int32_t cached_prompt_tokens = 0;                 // with first_scheduled: reused from the prefix cache
};
struct updates_msg {
  std::vector<seq_update> items;
};

// ---- tokenizer worker -> gateway -------------------------------------------------------------
struct out_item {
  int64_t rid = 0;
  std::string bytes;   // framed events, ready to write
  bool final = false;  // the request's last bytes: the gateway forgets it
};
struct output_msg {
  std::vector<out_item> items;
};

// ---- scheduler <-> shard executor ------------------------------------------------------------
struct step_msg {
  std::shared_ptr<serve::step_job> job;
};
struct step_done_msg {
  std::shared_ptr<serve::step_outcome> outcome;
};

// ---- gateway -> tokenizer worker -> scheduler (delegated): the admin set_policy request ----
struct set_policy_msg {
  std::string policy;  // a name or a path
  std::string config;
};
struct set_policy_reply {
  bool ok = false;
  std::string policy, previous, error;
};

// ---- gateway -> tokenizer worker -> scheduler (delegated): POST /reset_prefix_cache ----------
struct reset_prefix_cache_msg {};
struct reset_prefix_cache_reply {
  bool ok = false;  // false: requests were running
  int32_t running = 0;
};

// ---- LoRA adapters loaded and unloaded while the server runs (serve::adapter_registry) ----------
// The loader -> a tokenizer worker -> the scheduler -> the executor (delegated): `adapter` into
// `slot` (null: the slot emptied, which only the scheduler sends, after the slot drained).
struct lora_install_msg {
  int32_t slot = -1;
  std::shared_ptr<const lora_adapter> adapter;
};
struct lora_install_reply {
  bool ok = false;
  std::string error;
};
// The gateway -> a tokenizer worker -> the scheduler: an adapter was retired; its slot drains.
struct lora_retired_msg {};

// ---- supervisor -> others: a restarted actor's new handle ------------------------------------
struct executor_changed {
  caf::actor executor;
};
struct scheduler_changed {
  caf::actor scheduler;
};
struct worker_changed {
  int32_t index = 0;
  caf::actor worker;
};
struct workers_msg {  // scheduler learns the whole pool at start
  std::vector<caf::actor> workers;
};
struct gateway_msg {
  caf::actor gateway;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::generate_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::tokenize_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::cancel_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::submit_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::stop_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::updates_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::output_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::step_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::step_done_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::executor_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::scheduler_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::worker_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::workers_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::gateway_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::set_policy_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::set_policy_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::reset_prefix_cache_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::reset_prefix_cache_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::lora_install_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::lora_install_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::lora_retired_msg)
