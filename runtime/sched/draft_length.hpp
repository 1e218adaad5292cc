// How many tokens a draft model should guess for a sequence: as many as pay for themselves. A
// guess costs a draft forward pass (draft_cost: its price against the model's step, about the
// ratio of their weight bytes on a memory-bound decode), and the j-th guess yields a token only if
// every guess before it held. With per-guess acceptance a, k guesses give (1 - a^(k+1)) / (1 - a)
// tokens a step for 1 + k * draft_cost, so a sequence whose guesses keep failing (sampling at a
// high temperature, text the draft does not know) stops paying for them, while one the draft
// predicts keeps the whole k. Speculative decoding's adaptive draft length, as TensorRT-LLM and
// SGLang tune it per batch, here per sequence from its own history.
#pragma once

#include <cstdint>

namespace troupe::sched {

// Per-guess acceptance of one sequence, recent steps weighing most. Starts at `prior` as if
// `prior_weight` guesses had been seen, so a new sequence guesses at once.
class acceptance_estimate {
 public:
  explicit acceptance_estimate(double prior = 0.8, double prior_weight = 2.0)
      : accepted_(prior * prior_weight), tested_(prior_weight) {}
  // A step that carried `drafts` guesses and accepted the first `accepted` of them: the guesses
  // tested are those up to the first rejection (the rest say nothing).
  void observe(int32_t drafts, int32_t accepted);
  double rate() const noexcept { return accepted_ / tested_; }

 private:
  static constexpr double kDecay = 0.75;  // per step: about the last four steps count
  double accepted_, tested_;
};

// The k in 0..max_guesses with the most tokens per unit of step cost (ties: the smaller k).
int32_t worthwhile_guesses(double acceptance, double draft_cost, int32_t max_guesses);

// One sequence's draft length: how many guesses to ask for before a step, from its acceptance so
// far, with one guess every kProbeEvery steps when none pay (so that text turning predictable is
// noticed). draft_cost 0: always max_guesses. The scheduler keeps one per sequence; `troupe
// generate` one for its request.
class draft_length {
 public:
  static constexpr int32_t kProbeEvery = 8;
  draft_length(double draft_cost, int32_t max_guesses) : cost_(draft_cost), max_(max_guesses) {}
  int32_t want() const;
  // A step ran: it carried `drafts` guesses of which the first `accepted` held (0, 0: none), and
  // asked for `guessing` new ones after it (the probe clock restarts).
  void stepped(int32_t drafts, int32_t accepted, bool guessing);

 private:
  double cost_;
  int32_t max_;
  acceptance_estimate acceptance_;
  int32_t steps_without_ = 0;
};

}  // namespace troupe::sched
