#include "runtime/quant/divergence.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/core/error.hpp"

namespace troupe::quant {

double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab) {
  // log-softmax of both rows with their own maxima; KL = sum p (log p - log q).
  double mp = -INFINITY, mq = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) mp = std::max(mp, double{p_logits[i]}), mq = std::max(mq, double{q_logits[i]});
  double sp = 0, sq = 0;
  for (int64_t i = 0; i < vocab; ++i) sp += std::exp(p_logits[i] - mp), sq += std::exp(q_logits[i] - mq);
  const double lp = mp + std::log(sp), lq = mq + std::log(sq);
  double kl = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double log_p = p_logits[i] - lp, log_q = q_logits[i] - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);
}

divergence compare_logits(const std::vector<float>& ref, const std::vector<float>& test, int64_t vocab) {
  if (vocab <= 0 || ref.size() != test.size() || ref.size() % static_cast<size_t>(vocab) != 0)
    throw_error(errc::invalid_argument, "compare_logits: " + std::to_string(ref.size()) + " and " +
                                            std::to_string(test.size()) + " logits are not rows of " + std::to_string(vocab));
  divergence d;
  d.rows = static_cast<int64_t>(ref.size()) / vocab;
  int64_t same = 0;
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* p = ref.data() + r * vocab;
    const float* q = test.data() + r * vocab;
    const double kl = kl_divergence(p, q, vocab);
    d.mean_kl += kl;
    d.max_kl = std::max(d.max_kl, kl);
    same += std::max_element(p, p + vocab) - p == std::max_element(q, q + vocab) - q;
  }
  if (d.rows > 0) {
    d.mean_kl /= static_cast<double>(d.rows);
    d.top1_agreement = static_cast<double>(same) / static_cast<double>(d.rows);
  }
  return d;
}

}  // namespace troupe::quant
