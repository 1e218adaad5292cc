// Whole-row passes of the sampler over [vocab] logits: the checked maximum, greedy argmax, and
// the dense top-k / top-p cutoff and draw used when top-k does not shrink the row to a few.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampling/rank.hpp"

namespace troupe::sampling_detail {

// out[i] = exp(in[i] - max) (fast_exp_nonpositive) over a row, in its AVX2 build when the CPU
// has AVX2 (checked once), else the SSE baseline. Both give bit-identical results (no FMA), so a
// seed replays to the same tokens on any x86-64 machine. The two builds are exposed for tests.
void exp_row(const float* in, float max, float* out, int64_t n);
void exp_row_baseline(const float* in, float max, float* out, int64_t n);
void exp_row_avx2(const float* in, float max, float* out, int64_t n);  // only if AVX2 exists
bool cpu_has_avx2();

// Largest logit; throws troupe::error(invalid_input) naming the first NaN or +inf entry, or when
// every entry is -inf (nothing can be sampled).
float checked_max(std::span<const float> logits);

// Lowest id among the maxima of a checked row.
int32_t argmax(std::span<const float> logits, float max);

// Dense top-k and top-p over the whole row (w[i] = exp(logits[i] - max)): the cutoff of the
// top_k best (0 = off; otherwise < vocab), then the smallest prefix of those whose mass reaches
// top_p of theirs (top_p = 1: off). One histogram pass over 1/128-nat buckets; only the tokens
// of the one or two buckets that hold a cut are gathered and sorted.
cutoff dense_cutoff(std::span<const float> logits, std::span<const float> w, float max,
                    int64_t top_k, float top_p, std::vector<candidate>& scratch);

// Draws a token among those within `cut` and with logit - max >= min_p_log, with probability
// proportional to w; u in [0, 1). Walks in id order. Zeroes the weights of the dropped tokens.
int32_t draw_dense(std::span<const float> logits, std::span<float> w, float max,
                   const cutoff& cut, float min_p_log, double u);

}  // namespace troupe::sampling_detail
