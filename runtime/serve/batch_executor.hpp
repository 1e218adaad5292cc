// Runs one planned step on the engine and samples the rows that end a prompt or decode: the work
// of a shard executor, as a plain object (the actor only moves messages). Owns the step backend
// (the model runner and its KV pool, on the CPU or a CUDA device); the per-sequence samplers travel
// with the job.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/embedding.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/prefix/prefix_cache.hpp"
#include "runtime/sampling/logprobs.hpp"
#include "runtime/sampling/sampler.hpp"
#include "runtime/sched/scheduler.hpp"
#include "runtime/serve/draft_proposer.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/serve/step_backend.hpp"

namespace troupe::serve {

// A sequence's sampling state. Created by the scheduler side, then touched only by the executor
// (one step in flight at a time), so it needs no lock: output grows by the tokens it samples.
struct seq_sampling {
  explicit seq_sampling(const sampling_params& p, std::vector<int32_t> prompt_ids)
      : smp(p), prompt(std::move(prompt_ids)) {}
  sampler smp;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  int32_t logprobs = -1;  // >= 0: report each token's logprob and this many alternatives
  // >= 0: report each prompt token's logprob (given the ones before it) and this many
  // alternatives. prompt_logprobs_next is the next prompt index to report (the first token has
  // none), so a prompt recomputed after a preemption is not reported twice.
  int32_t prompt_logprobs = -1;
  size_t prompt_logprobs_next = 1;
  // An embedding request (request_spec::embed): how its prompt's last hidden state is finished
  // (embedding.hpp); nothing is sampled.
  std::optional<embedding_options> embed;
  // A rerank request's document (request_spec::embed_from_logits): its result is rerank_score of
  // the prompt's last logits row, as a one-value "embedding"; nothing is sampled.
  std::optional<rerank_tokens> rerank;
  // A classify request's input (request_spec::embed_from_logits): its result is label_probs of the
  // prompt's last logits row (a sequence classifier's, one logit per label); nothing is sampled.
  bool classify = false;
};

// A fresh sampling state equal to `old` after exactly `known_output` was sampled: used when an
// executor failed mid-step and may have advanced the RNG for tokens the scheduler never saw.
// Works because every sample() call takes exactly one RNG draw (sampler.hpp).
std::shared_ptr<seq_sampling> rebuild_sampling(const seq_sampling& old, std::span<const int32_t> known_output);

struct step_job {
  sched::step_plan plan;
  std::vector<std::shared_ptr<seq_sampling>> samplers;  // one per plan entry with sample == true
  // One per plan entry that scores its prompt (logits_mode::all without drafts), in plan order.
  std::vector<std::shared_ptr<seq_sampling>> prompt_scorers;
};

struct step_outcome {
  // The ids of the sampled entries, in plan order: counts[k] for the k-th (one each, or with
  // drafts 1..num_draft + 1); a lone -1 where that sequence failed.
  std::vector<int32_t> sampled;
  std::vector<int32_t> counts;
  // (seq_id, logprobs of a token it sampled) for sequences that asked (seq_sampling::logprobs),
  // in the order of the tokens.
  std::vector<std::pair<int64_t, token_logprobs>> logprobs;
  std::vector<std::pair<int64_t, std::string>> seq_errors;  // (seq_id, why) for the -1 entries
  // (seq_id, logprobs of its next prompt tokens, in order) for the prompt_scorers that had any.
  std::vector<std::pair<int64_t, std::vector<token_logprobs>>> prompt_logprobs;
  // (seq_id, embedding) for the embedding requests whose prompt ended in this step, and (seq_id,
  // {score}) for rerank documents; each has a placeholder 0 in `sampled` (request_spec::embed).
  std::vector<std::pair<int64_t, std::vector<float>>> embeddings;
  std::string step_error;        // non-empty: the whole step failed (nothing sampled)
  double engine_seconds = 0;
  // Prefix caching: the blocks listed in plan.kv_saves, copied out after the step (to publish).
  std::vector<prefix::saved_block> saved;
  // Speculative decoding with a draft model: (seq_id, the draft's guesses after the tokens it
  // sampled) for scheduler::propose once update() has taken the tokens. draft_error: the draft's
  // step failed, so there are no guesses this step (the sampled tokens stand).
  std::vector<std::pair<int64_t, std::vector<int32_t>>> proposals;
  std::string draft_error;
};

class batch_executor {
 public:
  // The CPU engine (make_cpu_backend): kv_type is the pool's element type (f32, or INT8 / FP8 codes
  // with per-token scales); adapters the LoRA adapters, in slot order (model_facts::adapters,
  // request_spec::adapter). A group of 2 or more: the step runs on a tensor-parallel group of that
  // many CPU shards, each with its part of every block (tensor_parallel_runner); the block ids the
  // scheduler hands out are the same.
  batch_executor(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks, int32_t block_size,
                 dtype kv_type = dtype::f32, model_runner_options runner_options = {},
                 const std::vector<std::shared_ptr<const lora_adapter>>& adapters = {}, parallel_config parallel = {});
  // Any backend (the CUDA runner: runtime/serve/cuda/cuda_step_backend.hpp).
  explicit batch_executor(std::unique_ptr<step_backend> backend);
  step_outcome run(step_job& job);
  // The payload layout of a block as the prefix cache stores it (the whole model's heads).
  prefix::kv_layout kv_layout() const { return backend_->kv_layout(); }
  const step_backend& backend() const noexcept { return *backend_; }
  // Speculative decoding with a draft model (sched_config::draft_model): after each step's
  // sampling, the draft guesses for the entries with num_lookahead (step_outcome::proposals).
  void set_draft(std::unique_ptr<draft_proposer> draft) { draft_ = std::move(draft); }
  // step_backend::set_adapter, between steps.
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
    backend_->set_adapter(slot, std::move(adapter));
  }

 private:
  std::unique_ptr<step_backend> backend_;
  std::unique_ptr<draft_proposer> draft_;
  step_result result_;
};

}  // namespace troupe::serve
