#include "runtime/kv/kv_cache.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe {

static size_t token_bytes(const model_config& c) {
  return static_cast<size_t>(c.num_hidden_layers) * 2 * c.num_key_value_heads * c.head_dim * sizeof(float);
}

kv_cache::kv_cache(const model_config& config, int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size), bytes_per_token_(token_bytes(config)) {
  if (num_blocks <= 0 || block_size <= 0)
    throw_error(errc::invalid_argument, "kv_cache: num_blocks (" + std::to_string(num_blocks) +
                                            ") and block_size (" + std::to_string(block_size) +
                                            ") must be positive");
  const size_t per_layer = static_cast<size_t>(num_blocks) * block_size * config.num_key_value_heads * config.head_dim;
  // NOTE: value-initialised so that a block read before it is written is zeros, not garbage.
  storage_.assign(per_layer * 2 * config.num_hidden_layers, 0.0f);
  layers_.resize(config.num_hidden_layers);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    auto& kv = layers_[l];
    kv.k = storage_.data() + per_layer * (2 * l);
    kv.v = storage_.data() + per_layer * (2 * l + 1);
    kv.block_size = block_size;
    kv.n_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
    kv.head_dim = static_cast<int32_t>(config.head_dim);
  }
}

int32_t kv_cache::blocks_for_budget(const model_config& config, size_t budget_bytes, int32_t block_size) {
  const size_t per_block = token_bytes(config) * block_size;
  return static_cast<int32_t>(std::max<size_t>(1, budget_bytes / per_block));
}

}  // namespace troupe
