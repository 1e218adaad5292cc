#include "runtime/engine/embedding.hpp"

#include <cmath>
#include <string>

#include "runtime/core/error.hpp"

namespace troupe {

void check_embedding_options(const embedding_options& opts, int64_t hidden_size) {
  if (opts.dimensions < 0)
    throw_error(errc::invalid_argument, "dimensions must be >= 0 (got " + std::to_string(opts.dimensions) + ")");
  if (opts.dimensions > hidden_size)
    throw_error(errc::invalid_argument, "dimensions (" + std::to_string(opts.dimensions) +
                                            ") exceeds the model's hidden_size (" + std::to_string(hidden_size) + ")");
}

std::vector<float> finish_embedding(std::span<const float> pooled, const embedding_options& opts) {
  check_embedding_options(opts, static_cast<int64_t>(pooled.size()));
  const size_t n = opts.dimensions > 0 ? static_cast<size_t>(opts.dimensions) : pooled.size();
  std::vector<float> out(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  if (!opts.normalize) return out;
  // The sum in double: thousands of squares in float lose the last bits of the norm.
  double sq = 0;
  for (float v : out) sq += static_cast<double>(v) * v;
  // torch.nn.functional.normalize's floor (eps 1e-12): a zero vector stays zero.
  const double scale = 1.0 / std::max(std::sqrt(sq), 1e-12);
  for (float& v : out) v = static_cast<float>(v * scale);
  return out;
}

}  // namespace troupe
