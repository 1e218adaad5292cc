#include "runtime/prefix/kv_block_io.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

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

// One rank's memory of one block's part (K or V) of one layer: [block_size, its heads, head_dim]
// codes (or floats), then [block_size, its heads] scales; and where its heads sit in the payload's
// rows of all heads.
struct part_span {
  char* codes;
  char* scales;        // null for a float32 pool
  size_t head_offset;  // the rank's first head
  size_t heads;
};

part_span part(const kv_cache& kv, const kv_layout& l, int64_t layer, bool value, block_id b, size_t head_offset) {
  const auto& p = kv.layer(layer);
  const size_t block = static_cast<size_t>(b), heads = static_cast<size_t>(p.n_kv_heads);
  const size_t codes = static_cast<size_t>(l.block_size) * heads * static_cast<size_t>(l.head_dim) * static_cast<size_t>(l.elem_bytes);
  const size_t scales = static_cast<size_t>(l.block_size) * heads * static_cast<size_t>(l.scale_bytes);
  if (kv.kv_type() == dtype::f32) {
    float* base = value ? p.v : p.k;
    return {reinterpret_cast<char*>(base) + block * codes, nullptr, head_offset, heads};
  }
  uint8_t* c = value ? p.v_codes : p.k_codes;
  float* sc = value ? p.v_scales : p.k_scales;
  return {reinterpret_cast<char*>(c) + block * codes, reinterpret_cast<char*>(sc) + block * scales, head_offset, heads};
}

// Visits every (layer, K/V, rank) part with the payload offsets of its first code and scale.
// copy(replica, pool_bytes, payload_offset, bytes) moves one run of a token's heads either way;
// replica counts the ranks before this one that hold the same heads (0: the first of them).
template <class Pools, class Copy>
void for_each_run(const Pools& ranks, int32_t replicas, const kv_layout& l, block_id b, Copy&& copy) {
  const size_t head_bytes = static_cast<size_t>(l.head_dim) * static_cast<size_t>(l.elem_bytes);
  const size_t all_heads = static_cast<size_t>(l.n_kv_heads);
  const auto group = static_cast<size_t>(replicas);
  size_t at = 0;
  for (int64_t i = 0; i < l.num_layers; ++i)
    for (bool value : {false, true}) {
      size_t head = 0;
      for (size_t k = 0; k < ranks.size(); ++k) {
        const int32_t replica = static_cast<int32_t>(k % group);
        const auto s = part(*ranks[k], l, i, value, b, head);
        for (size_t t = 0; t < static_cast<size_t>(l.block_size); ++t) {
          copy(replica, s.codes + t * s.heads * head_bytes, at + (t * all_heads + s.head_offset) * head_bytes,
               s.heads * head_bytes);
          if (s.scales) {
            const size_t sb = static_cast<size_t>(l.scale_bytes);
            copy(replica, s.scales + t * s.heads * sb, at + l.codes_bytes() + (t * all_heads + s.head_offset) * sb, s.heads * sb);
          }
        }
        if (k % group == group - 1) head += s.heads;
      }
      TROUPE_ASSERT(head == all_heads);
      at += l.layer_part_bytes();
    }
}

void check_group(std::span<const kv_cache* const> ranks, int32_t replicas, block_id b, const char* what) {
  if (ranks.empty()) throw_error(errc::invalid_argument, std::string(what) + ": no pools");
  if (replicas < 1 || ranks.size() % static_cast<size_t>(replicas) != 0)
    throw_error(errc::invalid_argument, std::string(what) + ": " + std::to_string(ranks.size()) +
                                            " pools are not groups of " + std::to_string(replicas) + " replicas");
  for (const auto* kv : ranks) check_block(*kv, b, what);
}

}  // namespace

kv_layout layout_of(std::span<const kv_cache* const> ranks, int32_t replicas) {
  kv_layout l = layout_of(*ranks.front());
  l.n_kv_heads = 0;
  for (size_t k = 0; k < ranks.size(); k += static_cast<size_t>(std::max(replicas, 1)))
    l.n_kv_heads += ranks[k]->num_layers() > 0 ? ranks[k]->layer(0).n_kv_heads : 0;
  return l;
}

void gather_block(std::span<const kv_cache* const> ranks, block_id b, std::string& out, int32_t replicas) {
  check_group(ranks, replicas, b, "gather_block");
  const kv_layout l = layout_of(ranks, replicas);
  const size_t at = out.size();
  out.resize(at + l.payload_bytes());
  char* dst = out.data() + at;
  for_each_run(ranks, replicas, l, b, [&](int32_t replica, char* pool, size_t off, size_t n) {
    if (replica == 0) std::memcpy(dst + off, pool, n);
  });
}

void scatter_block(std::span<kv_cache* const> ranks, block_id b, std::string_view payload, int32_t replicas) {
  std::vector<const kv_cache*> view(ranks.begin(), ranks.end());
  check_group(view, replicas, b, "scatter_block");
  const kv_layout l = layout_of(view, replicas);
  if (payload.size() != l.payload_bytes())
    throw_error(errc::invalid_argument, "scatter_block: payload has " + std::to_string(payload.size()) +
                                            " bytes; a block of this pool has " + std::to_string(l.payload_bytes()));
  for_each_run(view, replicas, l, b, [&](int32_t, char* pool, size_t off, size_t n) { std::memcpy(pool, payload.data() + off, n); });
}

void gather_block(const kv_cache& kv, block_id b, std::string& out) {
  const kv_cache* one[] = {&kv};
  gather_block(std::span<const kv_cache* const>(one), b, out);
}

void scatter_block(kv_cache& kv, block_id b, std::string_view payload) {
  kv_cache* one[] = {&kv};
  scatter_block(std::span<kv_cache* const>(one), b, payload);
}

}  // namespace troupe::prefix
