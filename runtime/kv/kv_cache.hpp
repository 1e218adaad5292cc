// The paged KV pool of one device: for each layer, K and V as [num_blocks, block_size,
// n_kv_heads, head_dim] float32. Which sequence owns which block is the allocator's business;
// the pool only stores, and the model reads and writes it through block tables.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

class kv_cache {
 public:
  kv_cache(const model_config& config, int32_t num_blocks, int32_t block_size = 16);

  int32_t num_blocks() const noexcept { return num_blocks_; }
  int32_t block_size() const noexcept { return block_size_; }
  int64_t num_layers() const noexcept { return static_cast<int64_t>(layers_.size()); }
  const kernels::paged_kv_layer& layer(int64_t i) const { return layers_[i]; }
  // Bytes of K+V one token occupies across all layers.
  size_t bytes_per_token() const noexcept { return bytes_per_token_; }
  size_t bytes() const noexcept { return storage_.size() * sizeof(float); }
  // Blocks a pool of `budget_bytes` holds for this model (at least 1).
  static int32_t blocks_for_budget(const model_config& config, size_t budget_bytes,
                                   int32_t block_size = 16);

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  size_t bytes_per_token_;
  std::vector<float> storage_;
  std::vector<kernels::paged_kv_layer> layers_;
};

}  // namespace troupe
