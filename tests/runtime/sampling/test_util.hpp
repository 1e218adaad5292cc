// Helpers shared by the sampling tests: crafted rows, draw counting, a chi-square statistic and
// a plain full-sort oracle of the kept set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "runtime/sampling/fast_exp.hpp"
#include "runtime/sampling/rank.hpp"
#include "runtime/sampling/sampler.hpp"

namespace troupe::test {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A vocab-sized row of -inf with log(prob) at the given ids: softmax gives back the probs.
inline std::vector<float> row_from_probs(size_t vocab, const std::map<int32_t, double>& probs) {
  std::vector<float> row(vocab, kNegInf);
  for (const auto& [id, p] : probs) row[static_cast<size_t>(id)] = static_cast<float>(std::log(p));
  return row;
}

inline sampling_params seeded(uint64_t seed) {
  sampling_params p;
  p.has_seed = true;
  p.seed = seed;
  return p;
}

// counts[id] over n draws; the row is copied per draw because sample() edits it in place.
inline std::map<int32_t, int64_t> draw_counts(sampler& s, const std::vector<float>& row,
                                              int64_t n) {
  std::map<int32_t, int64_t> counts;
  std::vector<float> work(row.size());
  for (int64_t i = 0; i < n; ++i) {
    std::copy(row.begin(), row.end(), work.begin());
    ++counts[s.sample(work, {}, {})];
  }
  return counts;
}

inline std::set<int32_t> keys(const std::map<int32_t, int64_t>& counts) {
  std::set<int32_t> out;
  for (const auto& kv : counts) out.insert(kv.first);
  return out;
}

// Pearson's statistic of observed counts against expected probabilities (ids absent from
// `expected` must not have been drawn: each such id adds +inf).
inline double chi_square(const std::map<int32_t, int64_t>& counts,
                         const std::map<int32_t, double>& expected, int64_t n) {
  double chi2 = 0.0;
  for (const auto& [id, p] : expected) {
    const auto it = counts.find(id);
    const double observed = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    const double e = p * static_cast<double>(n);
    chi2 += (observed - e) * (observed - e) / e;
  }
  for (const auto& kv : counts)
    if (!expected.count(kv.first)) chi2 = std::numeric_limits<double>::infinity();
  return chi2;
}

inline std::map<int32_t, double> softmax(const std::vector<float>& logits, double temperature) {
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits) max = std::max(max, static_cast<double>(l) / temperature);
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l) / temperature - max);
  std::map<int32_t, double> out;
  for (size_t i = 0; i < logits.size(); ++i)
    out[static_cast<int32_t>(i)] = std::exp(static_cast<double>(logits[i]) / temperature - max) / z;
  return out;
}

// The kept set by the definitions, with a full sort: top-k, then top-p on the top-k
// distribution, then min-p. Weights from fast_exp, as the sampler uses, so only summation
// order can differ. Returns the kept ranked prefix and, through boundary_gap, how far (in mass,
// relative to the total) the top-p boundary sits from the target (small = ambiguous to rounding).
struct oracle_result {
  std::vector<sampling_detail::candidate> kept;
  double boundary_gap = 1.0;
};

inline oracle_result oracle(const std::vector<float>& logits, int64_t top_k, float top_p,
                            float min_p) {
  using sampling_detail::candidate;
  std::vector<candidate> all;
  for (size_t i = 0; i < logits.size(); ++i) all.emplace_back(logits[i], static_cast<int32_t>(i));
  std::sort(all.begin(), all.end(), sampling_detail::by_rank{});
  const float max = all.front().first;
  size_t n = all.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < n) n = static_cast<size_t>(top_k);
  auto w = [&](size_t j) {
    return static_cast<double>(sampling_detail::fast_exp_nonpositive(all[j].first - max));
  };
  oracle_result r;
  if (top_p < 1.0f) {
    double total = 0.0;
    for (size_t j = 0; j < n; ++j) total += w(j);
    const double target = static_cast<double>(top_p) * total;
    double cum = 0.0;
    size_t j = 0;
    for (; j < n; ++j) {
      const double next = cum + w(j);
      if (next >= target) {
        r.boundary_gap = std::min(next - target, target - cum) / total;
        break;
      }
      cum = next;
    }
    n = std::min(n, j + 1);
  }
  if (min_p > 0.0f) {
    const float lg = std::log(min_p);
    size_t m = 0;
    while (m < n && all[m].first - max >= lg) ++m;
    n = m;
  }
  r.kept.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
  return r;
}

}  // namespace troupe::test
