// The rules a request sets on which tokens may come: allowed_token_ids, bad words, min_tokens
// and logit_bias, applied to a row before penalties and temperature, in vLLM's order (allowed
// ids, bad words, min_tokens, bias). logprobs are read from the row before any of this (vLLM's default),
// so they stay the model's own distribution.
#pragma once

#include <cstddef>
#include <span>

#include "runtime/sampling/sampler.hpp"

namespace troupe::sampling_detail {

// output: the tokens generated so far. Throws troupe::error(out_of_range) naming the field for
// an id outside the row.
void apply_logit_rules(std::span<float> logits, const sampling_params& p, std::span<const int32_t> output);

// Whether any rule is set (the common request skips the call).
inline bool has_logit_rules(const sampling_params& p) {
  return !p.allowed_token_ids.empty() || !p.bad_words_ids.empty() || p.min_tokens > 0 || !p.logit_bias.empty();
}

}  // namespace troupe::sampling_detail
