// top-k selection and the draw among the selected candidates.
#include "runtime/sampling/candidates.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"
#include "runtime/sampling/fast_exp.hpp"

namespace troupe::sampling_detail {

void select_top_k(std::span<const float> logits, int64_t k, std::vector<candidate>& out) {
  TROUPE_ASSERT(k >= 1);
  const size_t keep = static_cast<size_t>(k);
  const size_t capacity = std::max<size_t>(2 * keep, keep + 256);
  constexpr int64_t kScan = 16;
  // Room for a whole block past capacity: the append below writes before it knows whether the
  // token counts.
  out.resize(capacity + kScan);
  candidate* buf = out.data();
  size_t size = 0;
  auto prune = [&] {
    std::nth_element(buf, buf + (keep - 1), buf + size, by_rank{});
    size = keep;
  };
  // Tokens are scanned in id order, so a later token that merely ties the current k-th loses
  // the tie: the strict compare is exact, not an approximation. -inf never passes it.
  float threshold = -std::numeric_limits<float>::infinity();
  const float* lg = logits.data();
  const int64_t n = static_cast<int64_t>(logits.size());
  for (int64_t lo = 0; lo < n; lo += kScan) {
    const int64_t hi = std::min(n, lo + kScan);
    // Once the buffer is primed few tokens beat the k-th: a vectorised "any" skips most blocks.
    int any = 0;
    for (int64_t i = lo; i < hi; ++i) any |= lg[i] > threshold;
    if (!any) continue;
    for (int64_t i = lo; i < hi; ++i) {  // branch-free append
      buf[size] = {lg[i], static_cast<int32_t>(i)};
      size += lg[i] > threshold;
    }
    if (size >= capacity) {
      prune();
      threshold = buf[keep - 1].first;
    }
  }
  if (size > keep) prune();
  out.resize(size);
}

int32_t draw_candidates(std::vector<candidate>& cands, float top_p, float min_p_log, double u) {
  TROUPE_ASSERT(!cands.empty());
  const auto best = *std::min_element(cands.begin(), cands.end(), by_rank{});
  const float max = best.first;
  auto weight = [max](const candidate& c) { return fast_exp_nonpositive(c.first - max); };

  size_t kept = cands.size();
  if (min_p_log > -std::numeric_limits<float>::infinity()) {
    // min-p keeps a prefix of the rank order too; partition it to the front (stable order is
    // not needed: every later step either sorts or walks in a fixed order).
    auto mid = std::partition(cands.begin(), cands.end(),
                              [&](const candidate& c) { return c.first - max >= min_p_log; });
    kept = static_cast<size_t>(mid - cands.begin());
  }
  if (top_p < 1.0f) {
    // top-p runs on the top-k distribution, before min-p: its total includes min-p's losers,
    // which sit past `kept` (a rank-order suffix, so the top-p walk stops before them or at the
    // same point min-p does).
    double total = 0.0;
    for (const candidate& c : cands) total += weight(c);
    const double target = static_cast<double>(top_p) * total;
    // Sort lazily, in doubling chunks: top-p usually stops within the first few tokens.
    size_t sorted = 0;
    double cum = 0.0;
    size_t j = 0;
    for (; j < kept; ++j) {
      if (j == sorted) {
        const size_t end = std::min(kept, std::max<size_t>(64, 2 * sorted));
        if (end < kept)
          std::nth_element(cands.begin() + sorted, cands.begin() + end, cands.begin() + kept,
                           by_rank{});
        std::sort(cands.begin() + sorted, cands.begin() + end, by_rank{});
        sorted = end;
      }
      cum += weight(cands[j]);
      if (cum >= target) break;
    }
    kept = std::min(kept, j + 1);
  }

  double total = 0.0;
  for (size_t j = 0; j < kept; ++j) total += weight(cands[j]);
  const double target = u * total;
  double cum = 0.0;
  for (size_t j = 0; j < kept; ++j) {
    cum += weight(cands[j]);
    if (cum > target) return cands[j].second;
  }
  // Rounding left the walk just short: the last kept token with weight.
  for (size_t j = kept; j-- > 0;)
    if (weight(cands[j]) > 0.0f) return cands[j].second;
  TROUPE_ASSERT(false && "draw_candidates: no candidate has weight");
  return -1;
}

}  // namespace troupe::sampling_detail
