// The bytes of one KV block in the shared store: a header (format version, model identity, layer
// count, block size, KV heads, head size, KV dtype, the block's chain hash, its parent's and its
// token ids), the K/V payload, and a CRC-32C over all of it. check() accepts an entry only when
// every field equals what the reader expects, so a corrupted, stale or foreign entry is rejected
// (and recomputed) rather than ever reaching the KV pool.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/prefix/block_hash.hpp"

namespace troupe::prefix {

inline constexpr uint16_t kBlockFormatVersion = 1;

// The shape of one block's K/V in the pool, and so of a payload: for each layer, K then V, each
// [block_size, n_kv_heads, head_dim] of elem_bytes-sized elements, followed in a quantized pool
// by its scales, [block_size, n_kv_heads] of scale_bytes each.
struct kv_layout {
  int32_t num_layers = 0;
  int32_t block_size = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  std::string kv_dtype = "f32";
  int32_t elem_bytes = 4;
  int32_t scale_bytes = 0;  // 4 (one float32 per token and head) for INT8 / FP8 pools

  size_t codes_bytes() const noexcept {  // K (or V) codes of one layer
    return static_cast<size_t>(block_size) * n_kv_heads * head_dim * elem_bytes;
  }
  size_t scales_bytes() const noexcept { return static_cast<size_t>(block_size) * n_kv_heads * scale_bytes; }
  size_t layer_part_bytes() const noexcept { return codes_bytes() + scales_bytes(); }  // K (or V) of one layer
  size_t payload_bytes() const noexcept { return layer_part_bytes() * 2 * static_cast<size_t>(num_layers); }
  friend bool operator==(const kv_layout&, const kv_layout&) = default;
};

// Which block an entry claims to be.
struct block_meta {
  block_hash hash;
  block_hash parent;            // root_hash(identity) for the first block
  std::vector<int32_t> tokens;  // exactly block_size ids
};

enum class check_status : uint8_t {
  ok,
  bad_length,         // shorter or longer than its header says
  bad_magic,          // not a Troupe KV block at all
  bad_version,        // another format version
  identity_mismatch,  // another model, KV dtype or adapter
  layout_mismatch,    // another layer count, block size, head count or head size
  hash_mismatch,      // stored under a key it does not belong to
  tokens_mismatch,    // another parent or other token ids
  checksum_mismatch,  // bytes changed after writing
};
inline constexpr int kNumCheckStatus = 9;
std::string_view to_string(check_status s) noexcept;

class block_codec {
 public:
  // `identity` is cache_identity::key_component(). Throws troupe::error(invalid_argument) when a
  // layout field is not positive or the identity is empty or longer than 65535 bytes.
  block_codec(std::string identity, kv_layout layout);

  const kv_layout& layout() const noexcept { return layout_; }
  const std::string& identity() const noexcept { return identity_; }
  size_t header_bytes() const noexcept;
  size_t encoded_bytes() const noexcept { return header_bytes() + layout_.payload_bytes() + 4; }

  // Header + payload + checksum. `payload` must be layout().payload_bytes() long and meta.tokens
  // block_size long (asserted: both come from Troupe itself).
  std::string encode(const block_meta& meta, std::string_view payload) const;
  // Checks `entry` against what the reader expects; on ok, *payload views the K/V bytes inside it.
  check_status check(std::string_view entry, const block_meta& expected, std::string_view* payload) const;

 private:
  std::string identity_;
  kv_layout layout_;
};

}  // namespace troupe::prefix
