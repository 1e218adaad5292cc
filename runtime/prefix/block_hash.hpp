// Content hashes of full KV blocks, chained like vLLM's automatic prefix caching: a block's hash
// covers its parent's hash, its token ids and (through the root) the model identity, so equal
// hashes mean equal K/V. The algorithm is fixed (SHA-256, truncated to 128 bits; no seed drawn at
// run time) and versioned in every key: replicas on different machines agree (docs/prefix_cache.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::prefix {

// Bumped whenever the hash inputs or the key layout change; part of every store key.
inline constexpr std::string_view kHashVersion = "v1";

struct block_hash {
  std::array<uint8_t, 16> bytes{};
  friend bool operator==(const block_hash&, const block_hash&) = default;
  std::string hex() const;  // 32 lower-case hex digits
  // Throws troupe::error(invalid_argument) unless `hex` is 32 hex digits.
  static block_hash from_hex(std::string_view hex);
};

struct block_hash_hasher {
  size_t operator()(const block_hash& h) const noexcept;  // the first 8 bytes: already uniform
};

// Everything besides the tokens that a block's K/V bytes depend on.
struct cache_identity {
  std::string model_fingerprint;  // troupe::model_fingerprint(checkpoint)
  std::string kv_dtype = "f32";   // the pool's element type ("f32"; later "int8", "fp8")
  std::string adapter;            // a LoRA adapter's identity; empty for the base model
  std::string arithmetic;         // quant::kernel_arithmetic(checkpoint): "int8-dequant", ..., or empty
  int32_t block_size = 16;        // tokens per block

  // "<model_fingerprint>:kv-<kv_dtype>[:lora-<adapter>][:<arithmetic>]". Throws
  // troupe::error(invalid_argument) when a part is empty (fingerprint, dtype), holds ':' or white
  // space, or block_size < 1.
  std::string key_component() const;
};

// Hash of the empty prefix: SHA-256 of "troupe-prefix-cache/v1\n" followed by
// "identity=<key_component>\nblock_size=<n>\n", first 16 bytes.
block_hash root_hash(const cache_identity& id);
// A salted chain's root (vLLM's cache_salt): SHA-256 of "troupe-prefix-cache/v1\ncache_salt\n",
// root (16 bytes) and the salt's bytes, first 16 bytes. Requests that give different salts (or
// none) share no block, so a tenant cannot learn from a cache hit's timing what another tenant's
// prompts were; requests with the same salt share as usual. An empty salt is no salt (root as is).
block_hash salted_root(const block_hash& root, std::string_view salt);
// SHA-256 of parent (16 bytes) || tokens (int32, little-endian), first 16 bytes.
block_hash chain_hash(const block_hash& parent, std::span<const int32_t> tokens);
// Appends to `hashes` the hashes of the full blocks of `tokens` beyond the hashes.size() already
// there (they must be the hashes of the same tokens' first blocks).
void extend_block_hashes(std::vector<block_hash>& hashes, const block_hash& root,
                         std::span<const int32_t> tokens, int32_t block_size);
// "<ns>:v1:<key_component>:<hash hex>", e.g. "troupe:v1:qwen3-...-9f2c...:kv-f32:4be1...".
// Throws troupe::error(invalid_argument) for an empty namespace or one holding ':' or white space.
std::string store_key(std::string_view ns, const cache_identity& id, const block_hash& h);
// The same, with the identity's component computed once (the per-block hot path).
std::string store_key(std::string_view ns, std::string_view key_component, const block_hash& h);

}  // namespace troupe::prefix
