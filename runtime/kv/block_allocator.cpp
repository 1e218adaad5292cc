#include "runtime/kv/block_allocator.hpp"

#include <algorithm>
#include <string>

#include "runtime/core/error.hpp"

namespace troupe {

block_allocator::block_allocator(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size) {
  if (num_blocks < 1 || block_size < 1)
    throw_error(errc::invalid_argument, "block_allocator: need at least one block of at least one "
                                        "token; got " + std::to_string(num_blocks) + " blocks of " +
                                            std::to_string(block_size));
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  for (block_id b = 0; b < num_blocks; ++b) free_.push_back(b);
}

double block_allocator::usage() const noexcept {
  return static_cast<double>(num_used_blocks()) / static_cast<double>(num_total_blocks());
}

int32_t block_allocator::blocks_for_tokens(int64_t num_tokens) const noexcept {
  return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
}

int32_t block_allocator::blocks_needed(int64_t seq, int64_t num_tokens) const {
  int32_t want = blocks_for_tokens(num_tokens);
  auto it = tables_.find(seq);
  int32_t have = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.size());
  return want > have ? want - have : 0;
}

bool block_allocator::can_allocate(int64_t seq, int64_t num_tokens) const {
  return blocks_needed(seq, num_tokens) <= num_free_blocks();
}

bool block_allocator::allocate(int64_t seq, int64_t num_tokens) {
  int32_t need = blocks_needed(seq, num_tokens);
  if (need > num_free_blocks()) return false;
  auto& table = tables_[seq];
  for (int32_t i = 0; i < need; ++i) {
    block_id b = free_.front();
    free_.pop_front();
    TROUPE_ASSERT(ref_counts_[b] == 0);
    ref_counts_[b] = 1;
    table.push_back(b);
  }
  return true;
}

bool block_allocator::allocate_with_prefix(int64_t seq, std::span<const block_id> cached, int64_t num_tokens) {
  if (tables_.count(seq))
    throw_error(errc::invalid_argument, "block_allocator::allocate_with_prefix: sequence " + std::to_string(seq) +
                                            " already has blocks");
  const int32_t want = std::max(blocks_for_tokens(num_tokens), static_cast<int32_t>(cached.size()));
  int32_t idle = 0;  // cached blocks on the free list: taking them shrinks it
  for (block_id b : cached) {
    TROUPE_ASSERT(b >= 0 && static_cast<size_t>(b) < ref_counts_.size());
    idle += ref_counts_[b] == 0;
  }
  if (want - static_cast<int32_t>(cached.size()) > num_free_blocks() - idle) return false;
  auto& table = tables_[seq];
  for (block_id b : cached) {
    if (ref_counts_[b]++ == 0) {
      // Recently freed blocks sit at the back: search from there.
      auto it = std::find(free_.rbegin(), free_.rend(), b);
      TROUPE_ASSERT(it != free_.rend());
      free_.erase(std::next(it).base());
    }
    table.push_back(b);
  }
  bool ok = allocate(seq, num_tokens);
  TROUPE_ASSERT(ok);
  return true;
}

void block_allocator::fork(int64_t parent, int64_t child, int64_t num_tokens) {
  auto it = tables_.find(parent);
  if (it == tables_.end())
    throw_error(errc::invalid_argument, "block_allocator::fork: unknown sequence " + std::to_string(parent));
  if (tables_.count(child))
    throw_error(errc::invalid_argument, "block_allocator::fork: sequence " + std::to_string(child) +
                                            " already has blocks");
  size_t full = static_cast<size_t>(num_tokens / block_size_);
  TROUPE_ASSERT(full <= it->second.size());
  std::vector<block_id> shared(it->second.begin(), it->second.begin() + static_cast<ptrdiff_t>(full));
  for (block_id b : shared) ++ref_counts_[b];
  tables_.emplace(child, std::move(shared));
}

void block_allocator::free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) {
    TROUPE_ASSERT(ref_counts_[*b] > 0);
    if (--ref_counts_[*b] == 0) free_.push_back(*b);
  }
  tables_.erase(it);
}

void block_allocator::shrink(int64_t seq, int64_t num_tokens) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  auto& table = it->second;
  const auto keep = static_cast<size_t>(blocks_for_tokens(num_tokens));
  while (table.size() > keep) {
    const block_id b = table.back();
    TROUPE_ASSERT(ref_counts_[b] == 1);
    ref_counts_[b] = 0;
    free_.push_front(b);
    table.pop_back();
  }
}

std::span<const block_id> block_allocator::block_table(int64_t seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second;
}

void block_allocator::check_invariants() const {
  std::vector<int32_t> counted(ref_counts_.size(), 0);
  for (const auto& [seq, table] : tables_)
    for (block_id b : table) {
      TROUPE_ASSERT(b >= 0 && static_cast<size_t>(b) < counted.size());
      ++counted[b];
    }
  std::vector<char> on_free(ref_counts_.size(), 0);
  for (block_id b : free_) {
    TROUPE_ASSERT(!on_free[b]);  // never twice on the free list
    on_free[b] = 1;
  }
  int32_t used = 0;
  for (size_t b = 0; b < ref_counts_.size(); ++b) {
    TROUPE_ASSERT(counted[b] == ref_counts_[b]);
    TROUPE_ASSERT((ref_counts_[b] == 0) == (on_free[b] != 0));
    used += ref_counts_[b] > 0;
  }
  TROUPE_ASSERT(used + num_free_blocks() == num_total_blocks());
  if (tables_.empty()) TROUPE_ASSERT(num_free_blocks() == num_total_blocks());
}

}  // namespace troupe
