#include "runtime/prefix/kv_block_io.hpp"

#include <cstring>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

kv_layout layout_of(const kv_cache& kv) {
  kv_layout l;
  l.num_layers = static_cast<int32_t>(kv.num_layers());
  l.block_size = kv.block_size();
  l.n_kv_heads = kv.num_layers() > 0 ? kv.layer(0).n_kv_heads : 0;
  l.head_dim = kv.num_layers() > 0 ? kv.layer(0).head_dim : 0;
  l.kv_dtype = std::string(kv.dtype_name());  // "f32", "int8", "fp8_e4m3": part of every entry's identity
  l.elem_bytes = sizeof(float);
  return l;
}

namespace {
void check_block(const kv_cache& kv, block_id b, const char* what) {
  // NOTE: quantized pools (codes + per-token scales, runtime/quant) have no payload layout here yet.
  if (kv.kv_type() != dtype::f32)
    throw_error(errc::unsupported, std::string(what) + ": moving " + std::string(kv.dtype_name()) +
                                       " KV blocks through the prefix cache is not implemented (float32 pools only)");
  if (b < 0 || b >= kv.num_blocks())
    throw_error(errc::invalid_argument, std::string(what) + ": block " + std::to_string(b) + " outside the pool of " +
                                            std::to_string(kv.num_blocks()));
}
}  // namespace

void gather_block(const kv_cache& kv, block_id b, std::string& out) {
  check_block(kv, b, "gather_block");
  const kv_layout l = layout_of(kv);
  const size_t part = l.layer_part_bytes();
  const size_t floats = part / sizeof(float);
  const size_t at = out.size();
  out.resize(at + l.payload_bytes());
  char* dst = out.data() + at;
  for (int64_t i = 0; i < kv.num_layers(); ++i) {
    const auto& layer = kv.layer(i);
    std::memcpy(dst, layer.k + static_cast<size_t>(b) * floats, part);
    std::memcpy(dst + part, layer.v + static_cast<size_t>(b) * floats, part);
    dst += 2 * part;
  }
}

void scatter_block(kv_cache& kv, block_id b, std::string_view payload) {
  check_block(kv, b, "scatter_block");
  const kv_layout l = layout_of(kv);
  if (payload.size() != l.payload_bytes())
    throw_error(errc::invalid_argument, "scatter_block: payload has " + std::to_string(payload.size()) +
                                            " bytes; a block of this pool has " + std::to_string(l.payload_bytes()));
  const size_t part = l.layer_part_bytes();
  const size_t floats = part / sizeof(float);
  const char* src = payload.data();
  for (int64_t i = 0; i < kv.num_layers(); ++i) {
    const auto& layer = kv.layer(i);
    std::memcpy(layer.k + static_cast<size_t>(b) * floats, src, part);
    std::memcpy(layer.v + static_cast<size_t>(b) * floats, src + part, part);
    src += 2 * part;
  }
}

}  // namespace troupe::prefix
