#include "runtime/kv/kv_cache.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/core/mapped_file.hpp"

namespace troupe {

size_t kv_cache::token_bytes(const model_config& c, dtype t) noexcept {
  const size_t rows = static_cast<size_t>(c.num_hidden_layers) * 2 * c.num_key_value_heads;
  return t == dtype::f32 ? rows * c.head_dim * sizeof(float) : rows * (c.head_dim + sizeof(float));
}

std::string_view kv_cache::kv_dtype_name(dtype t) noexcept {
  switch (t) {
    case dtype::i8: return "int8";
    case dtype::f8_e4m3: return "fp8_e4m3";
    default: return "f32";
  }
}

dtype parse_kv_cache_dtype(std::string_view s) {
  if (s == "auto" || s == "float32" || s == "f32") return dtype::f32;
  if (s == "int8") return dtype::i8;
  if (s == "fp8" || s == "fp8_e4m3") return dtype::f8_e4m3;
  if (s == "fp8_e5m2") throw_error(errc::unsupported, "--kv-cache-dtype fp8_e5m2 is not supported; use fp8 (e4m3) or int8");
  throw_error(errc::invalid_argument,
              "--kv-cache-dtype: '" + std::string(s) + "' is not one of auto, float32, int8, fp8, fp8_e4m3");
}

kv_cache::kv_cache(const model_config& config, int32_t num_blocks, int32_t block_size, dtype kv_type)
    : num_blocks_(num_blocks), block_size_(block_size), type_(kv_type), bytes_per_token_(token_bytes(config, kv_type)) {
  if (num_blocks <= 0 || block_size <= 0)
    throw_error(errc::invalid_argument, "kv_cache: num_blocks (" + std::to_string(num_blocks) +
                                            ") and block_size (" + std::to_string(block_size) +
                                            ") must be positive");
  if (kv_type != dtype::f32 && kv_type != dtype::i8 && kv_type != dtype::f8_e4m3)
    throw_error(errc::invalid_argument, "kv_cache: element type " + std::string(to_string(kv_type)) +
                                            " is not F32, I8 or F8_E4M3");
  const size_t rows = static_cast<size_t>(num_blocks) * block_size * config.num_key_value_heads;
  const size_t per_layer = rows * config.head_dim;
  const size_t planes = 2 * static_cast<size_t>(config.num_hidden_layers);
  const size_t codes_bytes = kv_type == dtype::f32 ? per_layer * planes * sizeof(float) : per_layer * planes;
  const size_t scales_at = (codes_bytes + 63) / 64 * 64;
  bytes_ = kv_type == dtype::f32 ? codes_bytes : scales_at + rows * planes * sizeof(float);
  slab_ = huge_page_buffer(bytes_, "the KV cache");
  // NOTE: zeroed so that a block read before it is written is zeros, not garbage; writing it now
  // also commits the pages, so no decode step pays for their first touch.
  std::memset(slab_.get(), 0, bytes_);
  auto* floats = reinterpret_cast<float*>(slab_.get());
  auto* scales = reinterpret_cast<float*>(slab_.get() + scales_at);
  layers_.resize(config.num_hidden_layers);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    auto& kv = layers_[l];
    if (kv_type == dtype::f32) {
      kv.k = floats + per_layer * (2 * l);
      kv.v = floats + per_layer * (2 * l + 1);
    } else {
      kv.type = kv_type;
      kv.k_codes = slab_.get() + per_layer * (2 * l);
      kv.v_codes = slab_.get() + per_layer * (2 * l + 1);
      kv.k_scales = scales + rows * (2 * l);
      kv.v_scales = scales + rows * (2 * l + 1);
    }
    kv.block_size = block_size;
    kv.n_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
    kv.head_dim = static_cast<int32_t>(config.head_dim);
  }
}

int32_t kv_cache::blocks_for_budget(const model_config& config, size_t budget_bytes, int32_t block_size, dtype kv_type) {
  const size_t per_block = token_bytes(config, kv_type) * block_size;
  return static_cast<int32_t>(std::max<size_t>(1, budget_bytes / per_block));
}

}  // namespace troupe
