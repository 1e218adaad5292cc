// A draft model guessing for one sequence (`troupe generate --speculative-model`; the server's
// batched form is serve::draft_proposer): it keeps K/V for a prefix of the sequence's tokens in a
// private pool and, asked for guesses after a context, first computes what it lacks of it (the
// longest prefix it already holds is kept; its rejected guesses are simply overwritten), then
// guesses greedily, one token at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/single_sequence_pool.hpp"
#include "runtime/model/checkpoint.hpp"

namespace troupe {

// A draft's greedy guess from its logits row: the highest among the target's ids (a draft's
// vocabulary may be padded differently), the lowest id on a tie.
int32_t draft_guess(std::span<const float> row, int64_t target_vocab_size);

// Why `draft` cannot guess tokens for `model`, or "" when it can: it has no lm_head (an embedding
// model), is a sequence classifier, or has another vocabulary. troupe serve and troupe generate
// refuse a draft model by it.
std::string draft_model_problem(const checkpoint& draft, const checkpoint& model);

// What one guess costs against a step of `model` on a memory-bound decode: the ratio of the weight
// bytes each step reads (sched::draft_length's draft_cost).
double draft_guess_cost(const checkpoint& draft, const checkpoint& model);

class draft_sequence {
 public:
  // Room for max_len positions; guesses are ids below target_vocab_size. `draft` must outlive this
  // (and be one draft_model_problem accepts).
  draft_sequence(const checkpoint& draft, int64_t max_len, int64_t target_vocab_size, int32_t num_tokens);
  // Up to min(num_tokens, max_drafts) guesses of what follows `context` (empty when max_drafts <= 0
  // or the pool's positions would run out).
  std::vector<int32_t> propose(std::span<const int32_t> context, int32_t max_drafts);

 private:
  single_sequence_pool pool_;
  std::vector<int32_t> held_;   // the tokens whose K/V are in the pool, from position 0
  int64_t target_vocab_;
  int32_t num_tokens_;
  step_result res_;
};

}  // namespace troupe
