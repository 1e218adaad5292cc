#include "runtime/sampling/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/sampling/fast_exp.hpp"

namespace troupe {

token_logprobs logprobs_of(std::span<const float> logits, int32_t chosen, int32_t top_k) {
  const auto n = static_cast<int64_t>(logits.size());
  if (chosen < 0 || chosen >= n)
    throw_error(errc::invalid_argument, "logprobs: token " + std::to_string(chosen) + " is outside the row of " +
                                            std::to_string(n));
  if (top_k < 0 || top_k > max_top_logprobs)
    throw_error(errc::invalid_argument, "logprobs: top_k " + std::to_string(top_k) + " is outside [0, " +
                                            std::to_string(max_top_logprobs) + "]");
  // log Z = m + log sum exp(x - m). The exponentials are the sampler's vectorised float ones
  // (relative error <= 2e-7; std::exp in double took 1.6 ms per 151,936-entry row); each chunk
  // sums in float, the chunks in double, so the row's length adds no rounding worth a digit.
  float m = -INFINITY;
  for (float x : logits) m = std::max(m, x);
  double sum = 0;
  constexpr int64_t chunk = 1024;
  for (int64_t c = 0; c < n; c += chunk) {
    const int64_t end = std::min(n, c + chunk);
    float part = 0;
    for (int64_t i = c; i < end; ++i) part += sampling_detail::fast_exp_nonpositive(logits[static_cast<size_t>(i)] - m);
    sum += part;
  }
  const double log_z = static_cast<double>(m) + std::log(sum);
  token_logprobs out;
  const float x_chosen = logits[static_cast<size_t>(chosen)];
  out.logprob = static_cast<double>(x_chosen) - log_z;
  out.id = chosen;
  int64_t at_least = 0;  // vLLM's rank: ties count as at least as likely
  for (float x : logits) at_least += x >= x_chosen;
  out.rank = static_cast<int32_t>(at_least);
  if (top_k > 0) {
    // One pass keeping the k best (k <= 20): cheaper than sorting the row.
    auto better = [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    };
    std::vector<int32_t> best;
    best.reserve(static_cast<size_t>(top_k) + 1);
    // Ids arrive in increasing order, so a later logit equal to the k-th best never beats it:
    // once the list is full, only a strictly larger logit can enter.
    float threshold = -INFINITY;
    for (int32_t i = 0; i < n; ++i) {
      const float x = logits[static_cast<size_t>(i)];
      if (static_cast<int32_t>(best.size()) == top_k && !(x > threshold)) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
      if (static_cast<int32_t>(best.size()) > top_k) best.pop_back();
      if (static_cast<int32_t>(best.size()) == top_k) threshold = logits[static_cast<size_t>(best.back())];
    }
    for (int32_t id : best) out.top.emplace_back(id, static_cast<double>(logits[static_cast<size_t>(id)]) - log_z);
  }
  return out;
}

}  // namespace troupe
