// The top-k path: pick the k best tokens of a row without sorting it, then apply top-p / min-p
// and draw among those few. Only the prefix that top-p actually reaches gets sorted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampling/rank.hpp"

namespace troupe::sampling_detail {

// out = the min(k, #finite) best tokens of logits in rank order (unsorted); -inf never enters.
// O(vocab + k log k): a buffer of up to 2k is pruned back to k with nth_element, and tokens
// below the current k-th are skipped with a single compare.
void select_top_k(std::span<const float> logits, int64_t k, std::vector<candidate>& out);

// Draws from the candidates (non-empty, from select_top_k) after top-p (on their renormalised
// distribution) and min-p (logit - best >= min_p_log); u in [0, 1). Reorders cands.
int32_t draw_candidates(std::vector<candidate>& cands, float top_p, float min_p_log, double u);

}  // namespace troupe::sampling_detail
