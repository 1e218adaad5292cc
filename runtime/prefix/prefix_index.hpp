// The local prefix index: which KV block of the pool holds which full-block hash. A block carries
// at most one hash and a hash names at most one block. Which cached blocks are evictable and in
// what order is the allocator's free list (least recently freed first), as in vLLM: the index
// only forgets a block when the allocator hands it out for new content. Bounded by the pool size.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/kv/block_allocator.hpp"
#include "runtime/prefix/block_hash.hpp"

namespace troupe::prefix {

class prefix_index {
 public:
  explicit prefix_index(int32_t num_blocks);

  // The blocks holding hashes[0], hashes[1], ... up to the first miss, at most max_blocks of them.
  std::vector<block_id> match(std::span<const block_hash> hashes, size_t max_blocks) const;
  // Records that `block` holds the full block `hash`. False, changing nothing, when the hash is
  // already held (by this block or a duplicate computed concurrently: that copy stays uncached)
  // or the block already holds another hash (a bug in the caller: asserted).
  bool insert(const block_hash& hash, block_id block);
  // The allocator reuses `block` for new content: forget its hash. False when it held none.
  bool evict(block_id block);

  std::optional<block_hash> hash_of(block_id block) const;
  std::optional<block_id> block_of(const block_hash& hash) const;
  int32_t num_cached_blocks() const noexcept { return static_cast<int32_t>(by_hash_.size()); }
  int32_t num_blocks() const noexcept { return static_cast<int32_t>(of_block_.size()); }
  // Forgets everything (e.g. after the pool's contents were lost).
  void clear();
  // The two maps agree; TROUPE_ASSERTs otherwise.
  void check_invariants() const;

 private:
  std::unordered_map<block_hash, block_id, block_hash_hasher> by_hash_;
  std::vector<std::optional<block_hash>> of_block_;
};

}  // namespace troupe::prefix
