// RoPE's frequencies and cos/sin scale for a model config: plain RoPE, linear scaling, or YaRN,
// as transformers' modeling_rope_utils defines them. The CPU and CUDA runners both take theirs here.
#pragma once

#include <vector>

#include "runtime/model/config.hpp"

namespace troupe {

struct rope_frequencies {
  std::vector<float> inv_freq;   // [head_dim / 2]: angle of pair i at position p = p * inv_freq[i]
  float attention_factor = 1.0f; // multiplies cos and sin (YaRN's mscale; 1 otherwise)
};

// Computed in double and rounded once, as the float64 references do (transformers computes the
// same formulas in float32: the two differ by float32 rounding of inv_freq).
rope_frequencies rope_frequencies_of(const model_config& config);

}  // namespace troupe
