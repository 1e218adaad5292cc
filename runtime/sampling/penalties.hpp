// Repetition, frequency and presence penalties, vLLM's definitions, applied in place to a row.
#pragma once

#include <cstdint>
#include <span>

namespace troupe::sampling_detail {

// For each token present in prompt or output: logit / repetition if the logit is > 0, else
// logit * repetition. Then for each token in output, seen c times: logit -= frequency * c, and
// logit -= presence. Cost O(|prompt| + |output|) with a per-thread vocab-sized count table that
// is all-zero between calls. Throws troupe::error(out_of_range) for an id outside the row when
// that list is used (prompt only matters for the repetition penalty).
void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, float repetition, float presence,
                     float frequency);

}  // namespace troupe::sampling_detail
