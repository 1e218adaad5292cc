// sampler::sample: the vLLM pipeline (allowed ids, bad words, min_tokens, logit bias; penalties;
// greedy or temperature, top-k, top-p, min-p, draw) over one row, choosing the top-k path (few
// candidates) or the dense path (whole row).
// NOTE: min-p after top-k / top-p is vLLM v0's order (v1 applies min-p first, which changes
// the total top-p measures against). Both keep rank-order prefixes, so here the kept set is the
// shorter of the top-k/top-p prefix and the min-p prefix.
#include "runtime/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/core/error.hpp"
#include "runtime/sampling/candidates.hpp"
#include "runtime/sampling/grammar_gate.hpp"
#include "runtime/sampling/logit_rules.hpp"
#include "runtime/sampling/penalties.hpp"
#include "runtime/sampling/row.hpp"
#include "runtime/sampling/thinking_budget.hpp"

namespace troupe {

namespace {

// vLLM's _SAMPLING_EPS: dividing by a smaller temperature overflows real logits, and the result
// is the argmax anyway.
constexpr float kGreedyBelow = 1e-5f;

// Up to this top_k the candidate path (select k, then work on k tokens) is cheaper; above it the
// selection's nth_element prunes cost more than the dense path's fixed whole-row passes (at
// vocab 151936: ~250 us vs ~370 us at k = 1000, 1.0-1.8 ms vs ~370 us at k = 10000).
constexpr int64_t kCandidateTopK = 1024;

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

}  // namespace

sampler::sampler(const sampling_params& params) : params_(params) {
  validate(params_);
  seed_ = params_.has_seed ? params_.seed : fresh_seed();
  rng_.seed(seed_);
  if (params_.grammar) grammar_ = std::make_unique<sampling_detail::grammar_gate>(params_);
  if (params_.thinking_token_budget >= 0) thinking_ = std::make_unique<sampling_detail::thinking_budget>(params_);
}

sampler::~sampler() = default;
sampler::sampler(sampler&&) noexcept = default;
sampler& sampler::operator=(sampler&&) noexcept = default;

void sampler::replay(int32_t id) {
  rng_();
  if (grammar_) grammar_->advance(id, errc::invalid_input);  // a known output the grammar refuses
}

int32_t sampler::sample(std::span<float> logits, std::span<const int32_t> prompt,
                        std::span<const int32_t> output) {
  const int32_t id = sample_row(logits, prompt, output);
  if (grammar_) grammar_->advance(id, errc::internal);  // the mask excluded it: a bug
  return id;
}

int32_t sampler::sample_row(std::span<float> logits, std::span<const int32_t> prompt,
                            std::span<const int32_t> output) {
  using namespace sampling_detail;
  // The call's single draw, taken first whatever happens next. 53 random bits -> [0, 1), by
  // hand: std::uniform_real_distribution may consume a library-dependent number of outputs.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  if (logits.empty()) throw_error(errc::invalid_argument, "sample: the logits row is empty");
  const int64_t vocab = static_cast<int64_t>(logits.size());

  if (grammar_) grammar_->mask(logits);
  if (thinking_)
    if (auto end = thinking_->forced(output); end && *end < vocab && logits[static_cast<size_t>(*end)] > -INFINITY)
      return *end;  // the thinking budget is spent: the block ends here, before any other rule
  if (has_logit_rules(params_)) apply_logit_rules(logits, params_, output);
  if (grammar_ && std::none_of(logits.begin(), logits.end(), [](float l) { return l > -INFINITY; }))
    throw_error(errc::invalid_input,
                grammar_->complete()
                    ? "structured output: the grammar is complete but no stop id may end it here "
                      "(min_tokens, allowed_token_ids, bad_words or logit_bias exclude them)"
                    : "structured output: no token allowed by the grammar is left by min_tokens, "
                      "allowed_token_ids, bad_words or logit_bias");
  apply_penalties(logits, prompt, output, params_.repetition_penalty, params_.presence_penalty,
                  params_.frequency_penalty);

  if (params_.temperature < kGreedyBelow) return argmax(logits, checked_max(logits));

  if (params_.temperature != 1.0f) {
    const float t = params_.temperature;
    for (float& l : logits) l /= t;  // a division, as vLLM does, not a multiply by 1/t
  }
  const float min_p_log = params_.min_p > 0.0f ? std::log(params_.min_p)
                                               : -std::numeric_limits<float>::infinity();
  const float max = checked_max(logits);

  const int64_t top_k = params_.top_k > 0 && params_.top_k < vocab ? params_.top_k : 0;
  if (top_k > 0 && top_k <= kCandidateTopK) {
    select_top_k(logits, top_k, scratch_);
    return draw_candidates(scratch_, params_.top_p, min_p_log, u);
  }

  thread_local std::vector<float> weights;
  weights.resize(static_cast<size_t>(vocab));
  exp_row(logits.data(), max, weights.data(), vocab);
  cutoff cut;
  if (top_k > 0 || params_.top_p < 1.0f) {
    // Per thread, not scratch_: a cut bucket can hold most of the vocab, and that memory should
    // not stay attached to every sequence's sampler.
    thread_local std::vector<candidate> bucket_tokens;
    cut = dense_cutoff(logits, weights, max, top_k, params_.top_p, bucket_tokens);
  }
  return draw_dense(logits, weights, max, cut, min_p_log, u);
}

}  // namespace troupe
