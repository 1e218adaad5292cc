#include "runtime/prefix/prefix_index.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

prefix_index::prefix_index(int32_t num_blocks) {
  if (num_blocks < 1)
    throw_error(errc::invalid_argument, "prefix_index: need at least one block; got " + std::to_string(num_blocks));
  of_block_.resize(static_cast<size_t>(num_blocks));
  by_hash_.reserve(static_cast<size_t>(num_blocks));
}

std::vector<block_id> prefix_index::match(std::span<const block_hash> hashes, size_t max_blocks) const {
  std::vector<block_id> out;
  const size_t n = std::min(hashes.size(), max_blocks);
  for (size_t i = 0; i < n; ++i) {
    auto it = by_hash_.find(hashes[i]);
    if (it == by_hash_.end()) break;
    out.push_back(it->second);
  }
  return out;
}

bool prefix_index::insert(const block_hash& hash, block_id block) {
  TROUPE_ASSERT(block >= 0 && static_cast<size_t>(block) < of_block_.size());
  auto& slot = of_block_[static_cast<size_t>(block)];
  if (slot) {
    TROUPE_ASSERT(*slot == hash);  // a full block's content never changes while it is cached
    return false;
  }
  if (!by_hash_.emplace(hash, block).second) return false;
  slot = hash;
  return true;
}

bool prefix_index::evict(block_id block) {
  TROUPE_ASSERT(block >= 0 && static_cast<size_t>(block) < of_block_.size());
  auto& slot = of_block_[static_cast<size_t>(block)];
  if (!slot) return false;
  by_hash_.erase(*slot);
  slot.reset();
  return true;
}

std::optional<block_hash> prefix_index::hash_of(block_id block) const {
  if (block < 0 || static_cast<size_t>(block) >= of_block_.size()) return std::nullopt;
  return of_block_[static_cast<size_t>(block)];
}

std::optional<block_id> prefix_index::block_of(const block_hash& hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

void prefix_index::clear() {
  by_hash_.clear();
  for (auto& s : of_block_) s.reset();
}

void prefix_index::check_invariants() const {
  size_t held = 0;
  for (size_t b = 0; b < of_block_.size(); ++b) {
    if (!of_block_[b]) continue;
    ++held;
    auto it = by_hash_.find(*of_block_[b]);
    TROUPE_ASSERT(it != by_hash_.end() && it->second == static_cast<block_id>(b));
  }
  TROUPE_ASSERT(held == by_hash_.size());
}

}  // namespace troupe::prefix
