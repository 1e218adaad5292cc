// YaRN (arXiv 2309.00071) as transformers' _compute_yarn_parameters: each frequency pair is either
// kept (high frequencies, many rotations within the pretraining context: extrapolated), divided by
// the factor (low frequencies: interpolated), or blended linearly between the two over a ramp of
// dimensions bounded by beta_fast and beta_slow rotations.
#include "runtime/model/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe {

namespace {

// The dimension whose wavelength fits `rotations` times into `context` positions.
double correction_dim(double rotations, double dim, double base, double context) {
  return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

rope_frequencies rope_frequencies_of(const model_config& c) {
  const int64_t half = c.head_dim / 2;
  const double dim = static_cast<double>(c.head_dim);
  const rope_scaling& s = c.rope;
  rope_frequencies out;
  out.inv_freq.resize(static_cast<size_t>(half));
  double low = 0, high = 0;
  if (s.type == rope_scaling_type::yarn) {
    const double context = static_cast<double>(s.original_max_position_embeddings);
    low = correction_dim(s.beta_fast, dim, c.rope_theta, context);
    high = correction_dim(s.beta_slow, dim, c.rope_theta, context);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // as transformers: no division by zero in the ramp
    out.attention_factor = static_cast<float>(s.attention_factor);
  }
  for (int64_t i = 0; i < half; ++i) {
    const double extrapolated = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / dim);
    double f = extrapolated;
    if (s.type == rope_scaling_type::linear) {
      f = extrapolated / s.factor;
    } else if (s.type == rope_scaling_type::yarn) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double keep = 1.0 - ramp;  // transformers' inv_freq_extrapolation_factor
      f = extrapolated / s.factor * (1.0 - keep) + extrapolated * keep;
    }
    out.inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

}  // namespace troupe
