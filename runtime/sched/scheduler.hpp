// The continuous-batching scheduler as plain data in, data out (vLLM v1's shape): schedule()
// plans one step within the token budget and sequence limit, update() consumes the sampled ids.
// It owns the waiting and running queues and the block allocator. Invariants after every call:
// every running sequence holds blocks for all its computed tokens, no waiting sequence holds any,
// and with nothing queued the pool is full again.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/engine/step.hpp"
#include "runtime/kv/block_allocator.hpp"
#include "runtime/prefix/prefix_cache.hpp"
#include "runtime/sched/draft_length.hpp"
#include "runtime/sched/ngram_proposer.hpp"
#include "runtime/sched/policy.hpp"

namespace troupe::sched {

using clock = std::chrono::steady_clock;

struct sched_config {
  int32_t max_num_seqs = 64;              // sequences in one step (running set)
  int32_t max_num_batched_tokens = 2048;  // tokens in one step (decodes + prefill chunks)
  int32_t max_model_len = 4096;           // prompt + output tokens of one sequence
  bool enable_chunked_prefill = true;     // off: a prompt must fit the budget in one step
  int32_t long_prefill_token_threshold = 0;  // > 0: at most this many prompt tokens per sequence per step
  // > 0 (with chunked prefill): at most this many prompt tokens in a step that also decodes. On a
  // CPU a prompt token costs about as much as a whole decode step's weight read, so this is what
  // bounds inter-token latency while long prompts arrive; a prompt alone still gets the budget.
  int32_t max_prefill_tokens_while_decoding = 0;
  int32_t max_waiting = 4096;             // admission refuses more (too_many_requests)
  int32_t max_prompt_logits_chunk = 128;  // request_spec::prompt_logits: tokens per step (x vocab floats)
  // Static batching (baseline for benchmarks): requests join a batch only until its first token
  // is sampled; then nothing joins until every member has finished.
  bool static_batching = false;
  // Prefix caching (runtime/prefix): a sequence starts from the longest chain of cached full
  // blocks. Off here so that plain scheduling tests see plain allocation; `troupe serve` turns it
  // on. prefix_identity names what K/V depend on (its block_size is replaced by the pool's);
  // prefix_options.remote: a shared store is configured (see take_remote_lookups).
  bool enable_prefix_caching = false;
  prefix::cache_identity prefix_identity;  // its model_fingerprint must be set when enabled
  prefix::prefix_options prefix_options;
  // Speculative decoding by prompt lookup (num_tokens > 0): a decode carries up to num_tokens
  // drafts after its last token, verified in the same step (see scheduled_seq::num_draft).
  ngram_options speculative;
  // With speculative.num_tokens: the drafts come from a draft model the executor runs (propose())
  // instead of prompt lookup. Each sampling entry then reserves blocks for num_lookahead positions
  // past its chunk, where the draft writes its own K/V while guessing (scheduled_seq::num_lookahead).
  bool draft_model = false;
  // With draft_model: what one guess costs against a step of the model (about their weight bytes'
  // ratio). > 0: each sequence guesses only as many tokens as its recent acceptance pays for
  // (draft_length.hpp), probing with one guess every few steps when none pay; 0: always num_tokens.
  double draft_cost = 0;
  // vLLM's disable_by_batch_size: no drafts or guesses in a step planned while at least this many
  // sequences run (a large batch already keeps the cores busy; verifying drafts then costs more
  // than it saves). 0: never disabled.
  int32_t speculation_max_running = 0;
  // vLLM's max_loras: at most this many distinct LoRA adapters among the running sequences
  // (0 = no cap). A waiting sequence whose adapter would be one too many is not admitted, and
  // neither is any adapter sequence the policy orders after it (base-model ones still are): the
  // running adapters drain so that it gets in, where vLLM lets later requests of running adapters
  // pass it (under steady traffic for those, forever).
  int32_t max_loras = 0;
};

enum class finish_reason : uint8_t { stop, length, cancelled, deadline, error };

struct request_spec {
  int64_t seq_id = 0;
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  std::vector<int32_t> stop_ids;  // finish with `stop` when sampled (EOS ids merged in by the caller)
  int32_t priority = 0;
  std::string tenant;
  std::optional<clock::time_point> deadline;
  // The logits of every prompt row (prompt_logprobs): its prefill chunks ask the step for all
  // rows, at most sched_config::max_prompt_logits_chunk tokens a step (each row is vocab_size
  // floats), and it reuses no cached prefix (a reused block has no logits).
  bool prompt_logits = false;
  // Completions of one request (n > 1) have one prompt: with prefix caching, a sibling is not
  // admitted while this sequence (the first) still computes its prompt's full blocks, so that it
  // starts from them instead of computing them again beside it. -1: none.
  int64_t prompt_leader = -1;
  // A LoRA adapter (the executor's slot, step_sequence::adapter; -1: none) and its identity, which
  // roots the sequence's prefix-cache hash chain: blocks are shared only under the same adapter.
  int32_t adapter = -1;
  std::string adapter_identity;
  // vLLM's cache_salt: with prefix caching, the sequence shares blocks only with sequences of the
  // same salt (and adapter); "": unsalted, shared with every unsalted one.
  std::string cache_salt;
  // An embedding request (/v1/embeddings): the step that computes its prompt's last token asks for
  // that token's final hidden state (logits_mode::hidden) instead of logits, and update() then
  // finishes it (finish_reason stop) with no token: the executor's sampled entry for it is a
  // placeholder. No drafts, no prompt_logits; max_tokens is not used.
  bool embed = false;
  // With embed: that step asks for the last token's logits (logits_mode::last) instead, which the
  // executor turns into the sequence's result: a rerank request's score (serve::rerank_score).
  bool embed_from_logits = false;
};

enum class admit_status : uint8_t { ok, prompt_too_long, queue_full, invalid };
struct admission {
  admit_status status = admit_status::ok;
  std::string message;  // says what to change ("prompt has 5000 tokens; max_model_len is 4096 ...")
};

struct scheduled_seq {
  int64_t seq_id = 0;
  int32_t start_pos = 0;     // first position computed in this step
  int32_t num_tokens = 0;    // decode: 1; prefill: the chunk
  bool sample = false;       // the chunk ends at the last known token: a new token follows
  bool first_scheduled = false;  // first time this sequence runs (ends its queue time)
  int32_t num_cached_tokens = 0; // with first_scheduled: prompt tokens reused from the prefix cache
  // Speculative decoding: the chunk is the last token then num_draft guessed tokens, and every row
  // has logits. The executor samples row 0, then row j + 1 only while the token sampled at row j
  // equals draft j: the tokens out are exactly what decoding one at a time would give, 1 to
  // num_draft + 1 of them (update() takes the count).
  int32_t num_draft = 0;
  // Draft model (sched_config::draft_model): after this step the executor guesses this many tokens
  // past the ones it samples, for propose(); the block table covers that many positions past the
  // chunk (the draft writes its K/V there; the target's pool is not touched). 0: no guesses.
  int32_t num_lookahead = 0;
};

// One step's work. `batch` spans point into the plan's own buffers, so the plan is move-only and
// stays valid while the scheduler goes on (a cancel during the step cannot pull memory away).
struct step_plan {
  std::vector<scheduled_seq> seqs;
  std::vector<step_sequence> batch;  // same order as seqs
  std::vector<int32_t> tokens;       // every chunk back to back
  std::vector<int32_t> blocks;       // every block table back to back
  std::vector<int64_t> preempted;    // sequences preempted while planning this step
  int32_t num_batched_tokens = 0;
  int32_t num_sampled = 0;           // seqs with sample == true
  // Prefix caching: K/V to load into fresh blocks before the forward pass, and blocks this step
  // fills to copy out after it (for the shared store).
  std::vector<prefix::kv_load> kv_loads;
  std::vector<prefix::kv_save> kv_saves;

  step_plan() = default;
  step_plan(step_plan&&) = default;
  step_plan& operator=(step_plan&&) = default;
  step_plan(const step_plan&) = delete;
  step_plan& operator=(const step_plan&) = delete;
  bool empty() const noexcept { return seqs.empty(); }
};

// What update() reports per sequence of the step (plan order, sequences still alive only).
struct seq_event {
  int64_t seq_id = 0;
  std::vector<int32_t> tokens;           // the new tokens, in order: one, or with drafts up to 1 + num_draft
  std::optional<finish_reason> finished; // set when the sequence left (blocks already freed)
};

struct sched_stats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_free_blocks = 0;
  int32_t num_total_blocks = 0;
  int64_t num_preemptions = 0;  // since start
};

class scheduler {
 public:
  // Throws troupe::error(invalid_argument) when a budget is not positive or the pool cannot hold
  // one max_model_len sequence (it would then preempt itself forever).
  scheduler(const sched_config& cfg, int32_t num_blocks, int32_t block_size,
            std::unique_ptr<policy> pol = nullptr);

  // Queues a request (it joins the running batch at a later schedule()). Refuses, without
  // queueing, a prompt that leaves no room for one token under max_model_len.
  admission add(request_spec spec);
  // Plans the next step; may preempt running sequences (blocks freed, re-queued for
  // recomputation). An empty plan means there is nothing to run.
  step_plan schedule();
  // `sampled` holds the ids of the plan entries with sample == true, in plan order: one each, or
  // counts[k] for the k-th of them (counts empty: one each; with drafts, 1..num_draft + 1 ids, all
  // but the last equal to the drafts). Sequences that left since the plan (cancelled mid-step)
  // are skipped. Tokens after a stop id or past the length limit are dropped.
  std::vector<seq_event> update(const step_plan& plan, std::span<const int32_t> sampled,
                                std::span<const int32_t> counts = {});
  // Draft model: the executor's guesses of what follows a sequence's tokens as update() left them,
  // offered as drafts in its next decode (cut to the step's room and before any stop id, as
  // prompt-lookup drafts are). update() drops guesses it has not used. An unknown, finished or
  // waiting sequence is ignored.
  void propose(int64_t seq_id, std::vector<int32_t> drafts);
  // Ends a sequence now (cancel, deadline, a stop string the detokenizer found, an error) and
  // frees its blocks. False when it is not queued (already finished).
  bool finish(int64_t seq_id, finish_reason why);
  // Preempts every running sequence (blocks freed, re-queued for recomputation): what happens
  // when the executor holding their KV fails. Returns their ids, front of the order first.
  std::vector<int64_t> requeue_running();
  // vLLM's reset_prefix_cache: forgets every cached prefix block, so the next prompts are computed
  // cold (benchmarks of a cold cache without a restart). Only while nothing runs (a running
  // sequence's blocks are in the cache): false then, and nothing changes.
  bool reset_prefix_cache();
  // Ends every sequence whose deadline is <= now (reason deadline); returns their ids.
  std::vector<int64_t> expire(clock::time_point now);

  // Replaces the policy between steps without touching any sequence: both queues are re-sorted
  // by the new policy (ties keep arrival order) and it is told every queued sequence, in arrival
  // order (on_waiting, then on_running for the running ones). The old policy is destroyed.
  void set_policy(std::unique_ptr<policy> pol);
  // The prompt-token cap of steps that also decode (sched_config::max_prefill_tokens_while_decoding),
  // changed between steps by a prefill_pacer.
  void set_max_prefill_tokens_while_decoding(int32_t n) noexcept { cfg_.max_prefill_tokens_while_decoding = n; }
  const policy& current_policy() const noexcept { return *policy_; }

  bool has(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  bool idle() const noexcept { return seqs_.empty(); }
  sched_stats stats() const;
  const sched_config& config() const noexcept { return cfg_; }
  const block_allocator& allocator() const noexcept { return alloc_; }
  std::vector<int64_t> running_ids() const;
  std::vector<int64_t> waiting_ids() const;
  // The tokens (prompt + output) and output count of a queued sequence.
  std::span<const int32_t> tokens(int64_t seq_id) const;
  int32_t num_prompt_tokens(int64_t seq_id) const { return seqs_.at(seq_id).num_prompt; }
  int32_t num_output_tokens(int64_t seq_id) const;
  int32_t num_computed_tokens(int64_t seq_id) const;
  int32_t adapter_of(int64_t seq_id) const { return seqs_.at(seq_id).spec.adapter; }

  // TROUPE_ASSERTs the invariants in the header comment (O(pool + queues)).
  void check_invariants() const;

  // Prefix caching with a shared store (prefix_options.remote): sequences whose prompt extends past the
  // local hit are not admitted until their look-up is resolved (by the prefix-cache actor, which
  // answers within its budget, possibly with nothing). An unknown or finished id is ignored.
  std::vector<prefix::remote_lookup> take_remote_lookups();
  void resolve_remote(int64_t seq_id, prefix::remote_blocks found);
  // nullptr when prefix caching is off.
  const prefix::prefix_cache* prefix_cache() const noexcept { return prefix_.get(); }

 private:
  struct sequence {
    request_spec spec;
    std::vector<int32_t> tokens;  // prompt + output
    int32_t num_prompt = 0;
    int32_t max_total = 0;        // min(prompt + max_tokens, max_model_len)
    int32_t num_computed = 0;     // tokens whose K/V are in the pool
    int64_t arrival = 0;
    clock::time_point arrival_time;
    bool ever_scheduled = false;
    bool running = false;
    std::vector<int32_t> proposed;  // the draft model's guesses after `tokens` (propose())
    std::optional<draft_length> guesses;  // with a draft model: how many to ask for (draft_cost)
  };

  seq_view view(const sequence& s) const;
  bool before(int64_t a, int64_t b) const;
  void insert_sorted(std::vector<int64_t>& q, int64_t id);
  void preempt(int64_t id, step_plan& plan);
  int64_t pick_victim(const step_plan& plan);
  void add_to_plan(sequence& s, int32_t n, step_plan& plan, std::span<const int32_t> drafts = {},
                   int64_t spare_blocks = 0);
  std::vector<int32_t> drafts_for(const sequence& s, int32_t budget) const;
  void remove(int64_t id);
  int32_t chunk_limit(const sequence& s, int32_t budget) const;
  bool leader_computing_prompt(const sequence& s) const;
  bool grow(int64_t id, int64_t num_tokens);
  std::vector<int32_t> running_adapters() const;  // the distinct LoRA slots of running sequences

  sched_config cfg_;
  block_allocator alloc_;
  std::unique_ptr<policy> policy_;
  std::unique_ptr<prefix::prefix_cache> prefix_;
  std::unordered_map<int64_t, sequence> seqs_;
  std::vector<int64_t> waiting_;  // policy order
  std::vector<int64_t> running_;  // policy order; preemption takes from the back
  int64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
  bool speculating_ = false;  // this schedule() plans drafts (speculation_max_running)
};

std::string_view to_string(finish_reason r) noexcept;

}  // namespace troupe::sched
