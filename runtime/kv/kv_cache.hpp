// The paged KV pool of one device: for each layer, K and V as [num_blocks, block_size,
// n_kv_heads, head_dim], float32 or quantized (INT8 / FP8 codes with one float32 scale per
// token and head, docs/quantization.md). Which sequence owns which block is the allocator's
// business; the pool only stores, and the model reads and writes it through block tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

class kv_cache {
 public:
  // kv_type: f32, i8 or f8_e4m3 (parse_kv_cache_dtype); throws invalid_argument otherwise.
  kv_cache(const model_config& config, int32_t num_blocks, int32_t block_size = 16, dtype kv_type = dtype::f32);
  // One owner of the pool: the layer views point into it, so a copy would alias it.
  kv_cache(const kv_cache&) = delete;
  kv_cache& operator=(const kv_cache&) = delete;
  kv_cache(kv_cache&&) = default;
  kv_cache& operator=(kv_cache&&) = default;

  int32_t num_blocks() const noexcept { return num_blocks_; }
  int32_t block_size() const noexcept { return block_size_; }
  int64_t num_layers() const noexcept { return static_cast<int64_t>(layers_.size()); }
  const kernels::paged_kv_layer& layer(int64_t i) const { return layers_[i]; }
  dtype kv_type() const noexcept { return type_; }
  // The pool's element type as prefix-cache identities spell it: "f32", "int8", "fp8_e4m3".
  std::string_view dtype_name() const noexcept { return kv_dtype_name(type_); }
  // Bytes of K+V one token occupies across all layers (scales included).
  size_t bytes_per_token() const noexcept { return bytes_per_token_; }
  size_t bytes() const noexcept { return bytes_; }
  // Blocks a pool of `budget_bytes` holds for this model (at least 1).
  static int32_t blocks_for_budget(const model_config& config, size_t budget_bytes, int32_t block_size = 16,
                                   dtype kv_type = dtype::f32);

  static std::string_view kv_dtype_name(dtype t) noexcept;
  // bytes_per_token() of a pool of this model and element type, without making one.
  static size_t token_bytes(const model_config& config, dtype kv_type) noexcept;

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  dtype type_;
  size_t bytes_per_token_;
  // The pool (float32 K and V, or codes then scales) on 2 MB pages where the kernel grants them:
  // decode reads each head's rows 4 KB apart, one TLB entry per row on 4 KB pages.
  std::shared_ptr<uint8_t> slab_;
  size_t bytes_ = 0;
  std::vector<kernels::paged_kv_layer> layers_;
};

// --kv-cache-dtype (vLLM's spellings): "auto" / "float32" -> f32, "int8" -> i8, "fp8" / "fp8_e4m3"
// -> f8_e4m3. Throws troupe::error: unsupported for "fp8_e5m2", invalid_argument for anything else.
dtype parse_kv_cache_dtype(std::string_view text);

}  // namespace troupe
