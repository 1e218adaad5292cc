#include "runtime/prefix/prefix_cache.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

prefix_cache::prefix_cache(const cache_identity& id, int32_t num_blocks, prefix_options opts)
    : identity_(id), root_(root_hash(id)), block_size_(id.block_size), opts_(opts), index_(num_blocks) {}

prefix_cache::seq_state& prefix_cache::state(int64_t seq) {
  auto it = seqs_.find(seq);
  TROUPE_ASSERT(it != seqs_.end());
  return it->second;
}

void prefix_cache::extend(seq_state& s, std::span<const int32_t> tokens) {
  extend_block_hashes(s.hashes, s.root, tokens, block_size_);
}

const block_hash& prefix_cache::adapter_root(std::string_view adapter) {
  if (adapter.empty()) return root_;
  auto it = adapter_roots_.find(std::string(adapter));
  if (it == adapter_roots_.end()) {
    cache_identity id = identity_;
    id.adapter = std::string(adapter);
    it = adapter_roots_.emplace(std::string(adapter), root_hash(id)).first;
  }
  return it->second;
}

block_meta prefix_cache::meta(const seq_state& s, std::span<const int32_t> tokens, size_t b) const {
  block_meta m;
  m.hash = s.hashes[b];
  m.parent = b == 0 ? s.root : s.hashes[b - 1];
  auto first = tokens.begin() + static_cast<ptrdiff_t>(b * static_cast<size_t>(block_size_));
  m.tokens.assign(first, first + block_size_);
  return m;
}

// The last known token is always computed (its logits start the output), so at most
// (n - 1) / block_size whole blocks can be reused: a prompt of exactly k full blocks reuses k - 1
// and recomputes the last block (vLLM does the same) rather than write into a shared block.
static size_t reusable_blocks(size_t num_tokens, int32_t block_size) {
  return num_tokens == 0 ? 0 : (num_tokens - 1) / static_cast<size_t>(block_size);
}

void prefix_cache::add(int64_t seq, std::span<const int32_t> prompt, bool reuse, std::string_view adapter,
                       std::string_view cache_salt) {
  auto [it, fresh] = seqs_.try_emplace(seq);
  TROUPE_ASSERT(fresh);
  auto& s = it->second;
  s.reuse = reuse;
  s.root = salted_root(adapter_root(adapter), cache_salt);
  extend(s, prompt);
  if (!opts_.remote || !reuse) return;
  const size_t cap = reusable_blocks(prompt.size(), block_size_);
  const size_t local = index_.match(s.hashes, cap).size();
  if (local >= cap) return;  // everything reusable is already here
  const size_t want = (cap - local) * opts_.remote_block_bytes;
  if (opts_.remote_block_bytes > 0 && pending_remote_bytes_ + want > opts_.max_pending_remote_bytes) {
    ++stats_.num_remote_skipped;  // too much already in flight: this one recomputes
    return;
  }
  s.reserved_bytes = want;
  pending_remote_bytes_ += want;
  remote_lookup q;
  q.seq_id = seq;
  q.first_block = local;
  for (size_t b = local; b < cap; ++b) q.blocks.push_back(meta(s, prompt, b));
  lookups_.push_back(std::move(q));
  s.waiting_remote = true;
  ++stats_.num_remote_lookups;
}

bool prefix_cache::waiting_remote(int64_t seq) const {
  auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.waiting_remote;
}

std::vector<remote_lookup> prefix_cache::take_remote_lookups() {
  std::vector<remote_lookup> out;
  for (auto& q : lookups_)
    if (waiting_remote(q.seq_id)) out.push_back(std::move(q));  // not cancelled meanwhile
  lookups_.clear();
  return out;
}

void prefix_cache::resolve_remote(int64_t seq, remote_blocks found) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || !it->second.waiting_remote) return;
  auto& s = it->second;
  s.waiting_remote = false;
  // Hold what arrived (no more than was asked for, by construction of the look-up).
  const size_t held = std::min(found.payloads.size() * opts_.remote_block_bytes, s.reserved_bytes);
  pending_remote_bytes_ -= s.reserved_bytes - held;
  s.reserved_bytes = held;
  s.remote = std::move(found);
}

void prefix_cache::release(seq_state& s) {
  pending_remote_bytes_ -= s.reserved_bytes;
  s.reserved_bytes = 0;
}

prefix_cache::hit prefix_cache::match(int64_t seq, std::span<const int32_t> tokens) {
  auto& s = state(seq);
  TROUPE_ASSERT(!s.waiting_remote);
  extend(s, tokens);
  const size_t cap = reusable_blocks(tokens.size(), block_size_);
  hit h;
  if (!s.reuse) return h;
  h.local = index_.match(s.hashes, cap);
  // Fetched blocks continue the local chain only if they start at or before its end (local
  // blocks may have been evicted, or computed by another request, since the lookup).
  const size_t L = h.local.size();
  const auto& r = s.remote;
  const size_t r_end = std::min(r.first_block + r.payloads.size(), cap);
  if (r.first_block <= L && L < r_end)
    h.remote.assign(r.payloads.begin() + static_cast<ptrdiff_t>(L - r.first_block),
                    r.payloads.begin() + static_cast<ptrdiff_t>(r_end - r.first_block));
  return h;
}

void prefix_cache::admitted(int64_t seq, const hit& h, std::span<const block_id> table, int32_t num_prompt_tokens) {
  auto& s = state(seq);
  TROUPE_ASSERT(table.size() >= h.local.size() + h.remote.size());
  TROUPE_ASSERT(std::equal(h.local.begin(), h.local.end(), table.begin()));
  claimed(table.subspan(h.local.size()));
  s.registered = h.local.size();
  s.pending_loads.clear();
  for (size_t i = 0; i < h.remote.size(); ++i) s.pending_loads.push_back({table[h.local.size() + i], h.remote[i]});
  s.remote = {};  // the payloads now live in the loads only (gone after this step)
  release(s);
  if (s.admitted_once) return;
  s.admitted_once = true;
  const int32_t tokens = h.num_tokens(block_size_);
  s.cached_tokens = tokens;
  s.remote_tokens = static_cast<int32_t>(h.remote.size()) * block_size_;
  ++stats_.num_queries;
  stats_.num_hits += tokens > 0;
  stats_.query_tokens += num_prompt_tokens;
  stats_.hit_tokens += tokens;
  stats_.remote_hit_tokens += s.remote_tokens;
}

void prefix_cache::claimed(std::span<const block_id> fresh) {
  for (block_id b : fresh) stats_.evicted_blocks += index_.evict(b);
}

void prefix_cache::plan(int64_t seq, std::span<const int32_t> tokens, std::span<const block_id> table, int32_t start,
                        int32_t n, std::vector<kv_load>& loads, std::vector<kv_save>& saves) {
  auto& s = state(seq);
  for (auto& l : s.pending_loads) loads.push_back(std::move(l));
  s.pending_loads.clear();
  if (!opts_.remote) return;
  extend(s, tokens);
  const size_t first = static_cast<size_t>(start / block_size_);
  const size_t end = static_cast<size_t>((start + n) / block_size_);
  TROUPE_ASSERT(end <= s.hashes.size() && end <= table.size());
  for (size_t b = first; b < end; ++b)
    if (!index_.block_of(s.hashes[b])) saves.push_back({table[b], meta(s, tokens, b)});  // else published already
}

void prefix_cache::computed(int64_t seq, std::span<const int32_t> tokens, std::span<const block_id> table,
                            int32_t num_computed) {
  auto& s = state(seq);
  extend(s, tokens);
  const size_t full = static_cast<size_t>(num_computed / block_size_);
  TROUPE_ASSERT(full <= s.hashes.size() && full <= table.size());
  // insert() refuses a hash another block already holds: this copy then stays an ordinary block.
  for (size_t b = s.registered; b < full; ++b) index_.insert(s.hashes[b], table[b]);
  s.registered = std::max(s.registered, full);
}

void prefix_cache::preempted(int64_t seq) {
  auto& s = state(seq);
  s.registered = 0;
  s.pending_loads.clear();
}

void prefix_cache::forget_all() {
  index_.clear();
  for (auto& [id, s] : seqs_) {
    s.registered = 0;
    s.pending_loads.clear();
  }
}

void prefix_cache::removed(int64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  release(it->second);
  seqs_.erase(it);
}

int32_t prefix_cache::num_cached_tokens(int64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.cached_tokens;
}

int32_t prefix_cache::cached_prefix_tokens(int64_t seq, size_t num_tokens) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  const auto& s = it->second;
  if (s.admitted_once) return s.cached_tokens;
  const size_t cap = std::min(reusable_blocks(num_tokens, block_size_), s.hashes.size());
  size_t n = index_.match(s.hashes, cap).size();
  const auto& r = s.remote;
  if (r.first_block <= n) n = std::max(n, std::min(r.first_block + r.payloads.size(), cap));
  return static_cast<int32_t>(n) * block_size_;
}

int32_t prefix_cache::num_remote_tokens(int64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.remote_tokens;
}

prefix_stats prefix_cache::stats() const {
  prefix_stats s = stats_;
  s.cached_blocks = index_.num_cached_blocks();
  return s;
}

void prefix_cache::check_invariants() const {
  index_.check_invariants();
  size_t reserved = 0;
  for (const auto& [id, s] : seqs_) {
    TROUPE_ASSERT(s.registered <= s.hashes.size());
    reserved += s.reserved_bytes;
  }
  TROUPE_ASSERT(reserved == pending_remote_bytes_);
}

}  // namespace troupe::prefix
