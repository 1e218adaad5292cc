#include "runtime/prefix/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::prefix {

cost_model::cost_model(cost_options opts)
    : opts_(opts),
      bytes_per_s_(opts.prior_bytes_per_s),
      round_trip_s_(opts.prior_round_trip_s),
      prefill_tokens_per_s_(opts.prior_prefill_tokens_per_s) {}

static void blend(double& value, double sample, double weight, bool& measured) {
  // The first measurement replaces the prior outright: priors are guesses, not data.
  value = measured ? (1 - weight) * value + weight * sample : sample;
  measured = true;
}

void cost_model::observe_fetch(size_t bytes, double seconds) {
  std::lock_guard lock(mu_);
  // Bandwidth from transfers big enough that the round trip does not dominate.
  const double transfer_s = seconds - round_trip_s_;
  if (bytes < (1u << 20) || transfer_s <= 0) return;
  blend(bytes_per_s_, static_cast<double>(bytes) / transfer_s, opts_.smoothing, fetch_measured_);
}

void cost_model::observe_round_trip(double seconds) {
  std::lock_guard lock(mu_);
  if (seconds <= 0) return;
  round_trip_s_ = (1 - opts_.smoothing) * round_trip_s_ + opts_.smoothing * seconds;
}

void cost_model::observe_prefill(int64_t tokens, double seconds) {
  std::lock_guard lock(mu_);
  // Steps of a few tokens are decode-bound and say little about prefill speed.
  if (tokens < 16 || seconds <= 0) return;
  blend(prefill_tokens_per_s_, static_cast<double>(tokens) / seconds, opts_.smoothing, prefill_measured_);
}

fetch_plan cost_model::decide(size_t available, size_t block_bytes, int32_t block_tokens, double budget_s) const {
  std::lock_guard lock(mu_);
  fetch_plan p;
  if (available == 0 || block_bytes == 0 || block_tokens <= 0) return p;
  const double per_block_fetch = static_cast<double>(block_bytes) / bytes_per_s_;
  const double per_block_recompute = block_tokens / prefill_tokens_per_s_;
  const double usable = budget_s * opts_.budget_safety - round_trip_s_;
  const size_t fit = usable <= 0 ? 0 : static_cast<size_t>(std::floor(usable / per_block_fetch));
  const size_t k = std::min(available, fit);
  p.budget_limited = k < available;
  p.fetch_s = round_trip_s_ + static_cast<double>(k) * per_block_fetch;
  p.recompute_s = static_cast<double>(k) * per_block_recompute;
  p.num_blocks = k > 0 && p.fetch_s < p.recompute_s ? k : 0;
  return p;
}

double cost_model::bytes_per_s() const {
  std::lock_guard lock(mu_);
  return bytes_per_s_;
}
double cost_model::round_trip_s() const {
  std::lock_guard lock(mu_);
  return round_trip_s_;
}
double cost_model::prefill_tokens_per_s() const {
  std::lock_guard lock(mu_);
  return prefill_tokens_per_s_;
}

}  // namespace troupe::prefix
