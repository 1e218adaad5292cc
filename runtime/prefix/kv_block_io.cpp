#include "runtime/prefix/kv_block_io.hpp"

#include <cstring>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

kv_layout layout_for(const model_config& config, int32_t block_size, dtype kv_type) {
  kv_layout l;  // as kv_cache lays it out (runtime/kv/kv_cache.cpp)
  l.num_layers = static_cast<int32_t>(config.num_hidden_layers);
  l.block_size = block_size;
  l.n_kv_heads = static_cast<int32_t>(config.num_key_value_heads);
  l.head_dim = static_cast<int32_t>(config.head_dim);
  l.kv_dtype = std::string(kv_cache::kv_dtype_name(kv_type));  // part of every entry's identity
  const bool quantized = kv_type != dtype::f32;
  l.elem_bytes = quantized ? 1 : static_cast<int32_t>(sizeof(float));
  l.scale_bytes = quantized ? static_cast<int32_t>(sizeof(float)) : 0;
  return l;
}

kv_layout layout_of(const kv_cache& kv) {
  kv_layout l;
  l.num_layers = static_cast<int32_t>(kv.num_layers());
  l.block_size = kv.block_size();
  l.n_kv_heads = kv.num_layers() > 0 ? kv.layer(0).n_kv_heads : 0;
  l.head_dim = kv.num_layers() > 0 ? kv.layer(0).head_dim : 0;
  l.kv_dtype = std::string(kv.dtype_name());
  const bool quantized = kv.kv_type() != dtype::f32;
  l.elem_bytes = quantized ? 1 : static_cast<int32_t>(sizeof(float));
  l.scale_bytes = quantized ? static_cast<int32_t>(sizeof(float)) : 0;
  return l;
}

namespace {

void check_block(const kv_cache& kv, block_id b, const char* what) {
  if (b < 0 || b >= kv.num_blocks())
    throw_error(errc::invalid_argument, std::string(what) + ": block " + std::to_string(b) + " outside the pool of " +
                                            std::to_string(kv.num_blocks()));
}

// The pool's memory of one block's part (K or V) of one layer: codes (or floats), then scales.
struct part_span {
  char* codes;
  char* scales;  // null for a float32 pool
};

part_span part(const kv_cache& kv, const kv_layout& l, int64_t layer, bool value, block_id b) {
  const auto& p = kv.layer(layer);
  const size_t block = static_cast<size_t>(b);
  if (kv.kv_type() == dtype::f32) {
    float* base = value ? p.v : p.k;
    return {reinterpret_cast<char*>(base) + block * l.codes_bytes(), nullptr};
  }
  uint8_t* codes = value ? p.v_codes : p.k_codes;
  float* scales = value ? p.v_scales : p.k_scales;
  return {reinterpret_cast<char*>(codes) + block * l.codes_bytes(), reinterpret_cast<char*>(scales) + block * l.scales_bytes()};
}

}  // namespace

void gather_block(const kv_cache& kv, block_id b, std::string& out) {
  check_block(kv, b, "gather_block");
  const kv_layout l = layout_of(kv);
  const size_t at = out.size();
  out.resize(at + l.payload_bytes());
  char* dst = out.data() + at;
  for (int64_t i = 0; i < kv.num_layers(); ++i)
    for (bool value : {false, true}) {
      auto s = part(kv, l, i, value, b);
      std::memcpy(dst, s.codes, l.codes_bytes());
      dst += l.codes_bytes();
      if (s.scales) {
        std::memcpy(dst, s.scales, l.scales_bytes());
        dst += l.scales_bytes();
      }
    }
}

void scatter_block(kv_cache& kv, block_id b, std::string_view payload) {
  check_block(kv, b, "scatter_block");
  const kv_layout l = layout_of(kv);
  if (payload.size() != l.payload_bytes())
    throw_error(errc::invalid_argument, "scatter_block: payload has " + std::to_string(payload.size()) +
                                            " bytes; a block of this pool has " + std::to_string(l.payload_bytes()));
  const char* src = payload.data();
  for (int64_t i = 0; i < kv.num_layers(); ++i)
    for (bool value : {false, true}) {
      auto s = part(kv, l, i, value, b);
      std::memcpy(s.codes, src, l.codes_bytes());
      src += l.codes_bytes();
      if (s.scales) {
        std::memcpy(s.scales, src, l.scales_bytes());
        src += l.scales_bytes();
      }
    }
}

}  // namespace troupe::prefix
