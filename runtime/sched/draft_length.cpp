#include "runtime/sched/draft_length.hpp"

#include <algorithm>

namespace troupe::sched {

void acceptance_estimate::observe(int32_t drafts, int32_t accepted) {
  if (drafts <= 0) return;
  const int32_t tested = std::min(accepted + 1, drafts);
  accepted_ = kDecay * accepted_ + accepted;
  tested_ = kDecay * tested_ + tested;
}

int32_t worthwhile_guesses(double acceptance, double draft_cost, int32_t max_guesses) {
  const double a = std::clamp(acceptance, 0.0, 1.0);
  const double c = std::max(draft_cost, 0.0);
  int32_t best = 0;
  double best_rate = 1.0;  // no guesses: one token for one step
  double tokens = 1.0, held = 1.0;  // tokens a step with k guesses; a^k
  for (int32_t k = 1; k <= max_guesses; ++k) {
    held *= a;
    tokens += held;
    const double rate = tokens / (1.0 + k * c);
    if (rate > best_rate * (1.0 + 1e-9)) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

int32_t draft_length::want() const {
  const int32_t k = cost_ > 0 ? worthwhile_guesses(acceptance_.rate(), cost_, max_) : max_;
  return k == 0 && steps_without_ >= kProbeEvery ? 1 : k;
}

void draft_length::stepped(int32_t drafts, int32_t accepted, bool guessing) {
  acceptance_.observe(drafts, accepted);
  steps_without_ = guessing ? 0 : steps_without_ + 1;
}

}  // namespace troupe::sched
