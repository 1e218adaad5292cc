// Turns one row of logits into a token id: greedy, or seeded sampling with temperature, top-k,
// top-p, min-p and repetition / presence / frequency penalties (the vLLM semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "runtime/model/config.hpp"

namespace troupe::grammar {
class automaton;
}  // namespace troupe::grammar

namespace troupe::sampling_detail {
class grammar_gate;
class thinking_budget;
}

namespace troupe {

struct sampling_params {
  float temperature = 1.0f;         // 0 = greedy (so is anything below 1e-5, as in vLLM)
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 or -1 = off
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (applies to prompt and output tokens)
  float presence_penalty = 0.0f;    // [-2, 2] (output tokens)
  float frequency_penalty = 0.0f;   // [-2, 2] (output tokens)
  uint64_t seed = 0;
  bool has_seed = false;            // without a seed, a random one is drawn per request
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // Rules on which tokens may come, applied before the penalties in vLLM's order (logit_rules.hpp):
  std::vector<int32_t> allowed_token_ids;           // non-empty: only these can be sampled
  // Token sequences that may not be completed: the last id of each is banned when the output
  // ends with the ones before it (vLLM's bad_words, tokenized by the caller).
  std::vector<std::vector<int32_t>> bad_words_ids;
  int32_t min_tokens = 0;                           // until this many output tokens ...
  std::vector<int32_t> min_tokens_stop_ids;         // ... these cannot be sampled (the stop ids)
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits, each in [-100, 100]
  // Structured output: only tokens the grammar allows can be sampled, and once the grammar is
  // complete also grammar_end_ids (the stop ids), which end it. Applied first, as vLLM applies
  // its grammar bitmask before the sampler's own rules. Null: free text.
  std::shared_ptr<grammar::automaton> grammar;  // shared by requests with the same grammar
  std::vector<int32_t> grammar_end_ids;
  // With Qwen3's reasoning kept apart (separate_reasoning), the grammar leaves the think block
  // alone: <think> may start the output instead of the grammar's text, and inside the block
  // (grammar_in_thinking: the prompt opened it) nothing is masked until </think>. -1: no block.
  int32_t grammar_think_start = -1;
  int32_t grammar_think_end = -1;
  bool grammar_in_thinking = false;
  // vLLM's thinking_token_budget: once the think block (opened by think_start_id in the output,
  // or by the prompt: thinking_opened_in_prompt) holds this many tokens, the next token is
  // think_end_id, whatever the logits say (logprobs still report the model's own distribution).
  // -1: no budget. The grammar, when one applies, must allow think_end_id there, else the budget
  // gives way to it.
  int32_t thinking_token_budget = -1;
  int32_t think_start_id = -1;
  int32_t think_end_id = -1;
  bool thinking_opened_in_prompt = false;
};

// A request's sampling params completed from the checkpoint's generation defaults.
sampling_params defaults_from(const generation_defaults& g);

// Throws troupe::error(invalid_argument) naming the field when a value is out of range.
void validate(const sampling_params& p);

// Per-sequence sampler: owns the RNG so that the same seed and inputs give the same tokens,
// whatever else runs in the batch. Every sample() call takes exactly one draw from the RNG, so a
// replay with the same seed stays in step whatever the logits were. Vocab-sized scratch is per
// thread, not per sampler (one sampler per sequence must stay small).
class sampler {
 public:
  // Validates params (see validate()).
  explicit sampler(const sampling_params& params);
  ~sampler();
  sampler(sampler&&) noexcept;
  sampler& operator=(sampler&&) noexcept;
  // logits: [vocab] (modified in place by penalties/temperature). prompt and output are the
  // sequence's token ids so far (for penalties). Throws troupe::error: invalid_input for a NaN
  // or +inf logit or an all -inf row, out_of_range for a penalised id outside the row.
  // With a grammar, the token is also fed to it; throws troupe::error(invalid_input) when the
  // grammar and the other rules leave no token.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt,
                 std::span<const int32_t> output);
  // Moves the sampler as sample() would have when it returned `id`: one RNG draw, and the token
  // fed to the grammar. Rebuilds a sampler's state from a known output.
  void replay(int32_t id);
  const sampling_params& params() const noexcept { return params_; }
  // The seed in use: params.seed, or the one drawn from std::random_device (log it to replay).
  uint64_t seed() const noexcept { return seed_; }

 private:
  int32_t sample_row(std::span<float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output);

  sampling_params params_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;  // top-k candidates: at most 2 * 1024 + 16
  std::unique_ptr<sampling_detail::grammar_gate> grammar_;  // set when params.grammar is
  std::unique_ptr<sampling_detail::thinking_budget> thinking_;  // set when params.thinking_token_budget >= 0
};

}  // namespace troupe
