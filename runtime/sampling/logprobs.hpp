// Log-probabilities of a sampled token and of the most likely ones, as vLLM reports them by
// default: from the model's own distribution (log_softmax of the raw logits), before temperature,
// penalties and truncation shape the sampling distribution.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace troupe {

inline constexpr int32_t max_top_logprobs = 20;

struct token_logprobs {
  double logprob = 0;                             // of the sampled token
  std::vector<std::pair<int32_t, double>> top;    // (id, logprob), most likely first; ties by id
  int32_t id = -1;    // the token
  // Its rank in the row, vLLM's: how many tokens are at least as likely (1: the most likely).
  int32_t rank = 0;
  friend bool operator==(const token_logprobs&, const token_logprobs&) = default;
};

// `logits` is the raw row; `top_k` in [0, max_top_logprobs]. Throws troupe::error
// (invalid_argument) for a chosen id outside the row or top_k out of range.
token_logprobs logprobs_of(std::span<const float> logits, int32_t chosen, int32_t top_k);

}  // namespace troupe
