// KV-block bookkeeping for one paged pool: the free list, a reference count per block and each
// sequence's block table. Invariants: free + used == total; a block is on the free list exactly
// when its count is 0; with no sequences left the whole pool is free again.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

using block_id = int32_t;  // index into kv_cache; step_sequence::block_table holds these

class block_allocator {
 public:
  // Blocks 0..num_blocks-1 start on the free list in that order.
  block_allocator(int32_t num_blocks, int32_t block_size);

  int32_t block_size() const noexcept { return block_size_; }
  int32_t num_total_blocks() const noexcept { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free_blocks() const noexcept { return static_cast<int32_t>(free_.size()); }
  int32_t num_used_blocks() const noexcept { return num_total_blocks() - num_free_blocks(); }
  // Fraction of the pool in use, in [0, 1].
  double usage() const noexcept;
  int32_t blocks_for_tokens(int64_t num_tokens) const noexcept;

  // New blocks `seq` needs so that its table covers `num_tokens` tokens (0 if it already does).
  int32_t blocks_needed(int64_t seq, int64_t num_tokens) const;
  bool can_allocate(int64_t seq, int64_t num_tokens) const;
  // Grows (or creates) `seq`'s table to cover `num_tokens` tokens, taking blocks from the front of
  // the free list. Returns false and changes nothing when too few blocks are free.
  bool allocate(int64_t seq, int64_t num_tokens);
  // Room for one more token after `num_tokens` (a decode step).
  bool append_slot(int64_t seq, int64_t num_tokens) { return allocate(seq, num_tokens + 1); }
  // Prefix caching: creates `seq`'s table from `cached` (blocks holding a reusable prefix; each
  // is shared when in use, else taken off the free list), then grows it to cover `num_tokens`
  // from the front of the free list. Returns false and changes nothing when too few are free.
  bool allocate_with_prefix(int64_t seq, std::span<const block_id> cached, int64_t num_tokens);
  // Gives `child` the first num_tokens / block_size (full) blocks of `parent`, shared: their
  // counts go up and neither sequence may write them again (prefix sharing).
  void fork(int64_t parent, int64_t child, int64_t num_tokens);
  // Drops `seq`'s table. Blocks whose count reaches 0 go to the back of the free list, last
  // block of the table first (as vLLM does: a prefix cache then evicts tails before heads).
  // Freeing an unknown sequence is a no-op (cancel and finish may race).
  void free(int64_t seq);
  // Gives back the blocks of `seq`'s table past what `num_tokens` tokens need (the room a step's
  // rejected draft tokens took), to the front of the free list: they hold nothing reusable, so
  // they are the first to be taken again. Their counts must be 1 (never shared).
  void shrink(int64_t seq, int64_t num_tokens);

  bool has(int64_t seq) const { return tables_.count(seq) != 0; }
  std::span<const block_id> block_table(int64_t seq) const;
  int32_t ref_count(block_id b) const { return ref_counts_.at(static_cast<size_t>(b)); }
  size_t num_sequences() const noexcept { return tables_.size(); }
  std::vector<block_id> free_list() const { return {free_.begin(), free_.end()}; }

  // Recounts everything from the tables (O(pool)); TROUPE_ASSERTs on any mismatch.
  void check_invariants() const;

 private:
  int32_t block_size_;
  std::deque<block_id> free_;
  std::vector<int32_t> ref_counts_;
  std::unordered_map<int64_t, std::vector<block_id>> tables_;
};

}  // namespace troupe
