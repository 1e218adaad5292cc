// Byte-level BPE tables and merge loop (see bpe.hpp).
#include "runtime/tokenizer/bpe.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/hash.hpp"

namespace troupe::tok {

void bpe_model::reserve(size_t num_tokens, size_t num_merges) {
  spans_.reserve(num_tokens);
  blob_.reserve(num_tokens * 8);
  size_t cap = std::bit_ceil(std::max<size_t>(16, num_tokens * 2));
  if (cap > lookup_.size()) {
    std::vector<lookup_slot> old = std::move(lookup_);
    lookup_.assign(cap, lookup_slot{});
    lookup_count_ = 0;
    for (const lookup_slot& s : old)
      if (s.id >= 0) insert_lookup(s.id, s.hash);
  }
  rehash_merges(std::bit_ceil(std::max<size_t>(16, num_merges * 4 / 3 + 1)));
}

void bpe_model::rehash_merges(size_t capacity) {
  if (capacity <= merge_slots_.size()) return;
  std::vector<uint64_t> old = std::move(merge_slots_);
  merge_slots_.assign(capacity, empty_slot);
  merge_shift_ = 64 - std::countr_zero(capacity);
  size_t mask = capacity - 1;
  for (uint64_t s : old) {
    if (s == empty_slot) continue;
    size_t i = slot_of(s >> rank_bits);
    while (merge_slots_[i] != empty_slot) i = (i + 1) & mask;
    merge_slots_[i] = s;
  }
}

void bpe_model::grow_lookup() {
  std::vector<lookup_slot> old = std::move(lookup_);
  lookup_.assign(std::max<size_t>(16, old.size() * 2), lookup_slot{});
  lookup_count_ = 0;
  for (const lookup_slot& s : old)
    if (s.id >= 0) insert_lookup(s.id, s.hash);
}

bool bpe_model::insert_lookup(int32_t id, uint64_t hash) {
  if ((lookup_count_ + 1) * 2 > lookup_.size()) grow_lookup();
  std::string_view bytes = token_bytes(id);
  size_t mask = lookup_.size() - 1;
  size_t i = static_cast<size_t>(hash) & mask;
  for (; lookup_[i].id >= 0; i = (i + 1) & mask) {
    if (lookup_[i].hash == hash && token_bytes(lookup_[i].id) == bytes) return false;
  }
  lookup_[i] = lookup_slot{hash, id};
  ++lookup_count_;
  return true;
}

std::optional<int32_t> bpe_model::find_token(std::string_view bytes, uint64_t hash) const {
  if (lookup_.empty()) return std::nullopt;
  size_t mask = lookup_.size() - 1;
  for (size_t i = static_cast<size_t>(hash) & mask;; i = (i + 1) & mask) {
    const lookup_slot& s = lookup_[i];
    if (s.id < 0) return std::nullopt;
    if (s.hash == hash && token_bytes(s.id) == bytes) return s.id;
  }
}

void bpe_model::find_tokens(const std::string_view* keys, const uint64_t* hashes, size_t n,
                            int32_t* ids) const {
  const size_t mask = lookup_.size() - 1;
  for (size_t k = 0; k < n; ++k) __builtin_prefetch(&lookup_[static_cast<size_t>(hashes[k]) & mask]);
  for (size_t k = 0; k < n; ++k) {  // candidates by hash alone
    ids[k] = -1;
    for (size_t i = static_cast<size_t>(hashes[k]) & mask; lookup_[i].id >= 0; i = (i + 1) & mask) {
      if (lookup_[i].hash == hashes[k]) {
        ids[k] = lookup_[i].id;
        __builtin_prefetch(&spans_[static_cast<size_t>(ids[k])]);
        break;
      }
    }
  }
  for (size_t k = 0; k < n; ++k)
    if (ids[k] >= 0) __builtin_prefetch(blob_.data() + spans_[static_cast<size_t>(ids[k])].off);
  for (size_t k = 0; k < n; ++k) {  // verify the bytes; a 64-bit hash collision takes the slow path
    if (ids[k] >= 0 && token_bytes(ids[k]) != keys[k]) {
      auto id = find_token(keys[k], hashes[k]);
      ids[k] = id ? *id : -1;
    }
  }
}

void bpe_model::add_token(int32_t id, std::string_view bytes, bool byte_level, uint64_t hash) {
  if (id < 0) throw_error(errc::invalid_checkpoint, "negative token id " + std::to_string(id));
  if (static_cast<size_t>(id) >= max_token_ids)
    throw_error(errc::unsupported, "token id " + std::to_string(id) + " above Troupe's limit of " +
                                       std::to_string(max_token_ids - 1));
  size_t uid = static_cast<size_t>(id);
  if (uid >= spans_.size()) spans_.resize(uid + 1);
  if (spans_[uid].len != absent)
    throw_error(errc::invalid_checkpoint, "token id " + std::to_string(id) + " appears twice in the vocabulary");
  if (blob_.size() + bytes.size() >= absent)
    throw_error(errc::invalid_checkpoint, "vocabulary larger than 4 GiB");
  spans_[uid] = span{static_cast<uint32_t>(blob_.size()), static_cast<uint32_t>(bytes.size())};
  blob_.append(bytes);
  ++num_tokens_;
  if (byte_level && !insert_lookup(id, hash))
    throw_error(errc::invalid_checkpoint,
                "two vocabulary entries decode to the same bytes (the second has id " + std::to_string(id) + ")");
}

void bpe_model::add_merge(std::string_view left, std::string_view right, const std::string& where) {
  auto l = token_id(left);
  auto r = token_id(right);
  std::string joined;
  joined.reserve(left.size() + right.size());
  joined.append(left).append(right);
  auto m = token_id(joined);
  if (!l || !r || !m)
    throw_error(errc::invalid_checkpoint, where + ": merge " + std::to_string(num_merges_) +
                                              " joins a part or makes a token that is not in the vocabulary");
  add_merge_ids(*l, *r, *m);
}

void bpe_model::add_merge_ids(int32_t left, int32_t right, int32_t merged) {
  // Load factor up to 3/4: Qwen3's merges fill 58% of 2^18 slots (4 MiB, friendlier to caches).
  if ((num_merges_ + 1) * 4 > merge_slots_.size() * 3) rehash_merges(std::max<size_t>(16, merge_slots_.size() * 2));
  if (num_merges_ >= max_merges)
    throw_error(errc::unsupported, "more than " + std::to_string(max_merges) + " merges");
  merged_by_rank_.push_back(merged);
  uint64_t key = pair_key(left, right);
  size_t mask = merge_slots_.size() - 1;
  size_t i = slot_of(key);
  while (merge_slots_[i] != empty_slot) {
    if ((merge_slots_[i] >> rank_bits) == key) {  // HF keeps the first (lowest) rank of a repeated pair
      ++num_merges_;
      return;
    }
    i = (i + 1) & mask;
  }
  merge_slots_[i] = (key << rank_bits) | num_merges_;
  ++num_merges_;
}

void bpe_model::finish(const std::string& where) {
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    auto id = token_id(std::string_view(&c, 1));
    if (!id)
      throw_error(errc::unsupported, where + ": no vocabulary token for byte " + std::to_string(b) +
                                         " (byte-level BPE needs all 256)");
    byte_ids_[b] = *id;
  }
  if (merge_slots_.empty()) rehash_merges(16);
}

void bpe_model::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (auto id = token_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() <= small_word_bytes) {
    encode_word_small(word, out);
  } else if (word.size() < long_word_bytes || !encode_word_buckets(word, out)) {
    encode_word_heap(word, out);
  }
}

void bpe_model::encode_word_small(std::string_view word, std::vector<int32_t>& out) const {
  TROUPE_ASSERT(!word.empty() && word.size() <= small_word_bytes);
  int32_t ids[small_word_bytes];
  uint32_t ranks[small_word_bytes];  // ranks[k]: rank of the pair (ids[k], ids[k + 1])
  size_t m = word.size();
  for (size_t k = 0; k < m; ++k) ids[k] = byte_ids_[static_cast<uint8_t>(word[k])];
  for (size_t k = 0; k + 1 < m; ++k) ranks[k] = find_rank(ids[k], ids[k + 1]);
  while (m > 1) {
    size_t best = 0;
    uint32_t best_rank = ranks[0];
    for (size_t k = 1; k + 1 < m; ++k) {
      if (ranks[k] < best_rank) {
        best_rank = ranks[k];
        best = k;
      }
    }
    if (best_rank == no_rank) break;
    ids[best] = merged_by_rank_[best_rank];
    std::copy(ids + best + 2, ids + m, ids + best + 1);
    std::copy(ranks + best + 1, ranks + m - 1, ranks + best);
    --m;
    if (best > 0) ranks[best - 1] = find_rank(ids[best - 1], ids[best]);
    if (best + 1 < m) ranks[best] = find_rank(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + m);
}

void bpe_model::encode_word_heap(std::string_view word, std::vector<int32_t>& out) const {
  // Symbols stay at their first byte's index: a merge keeps the left one and unlinks the right,
  // so a queued (rank, pos) entry is still current exactly when the pair at pos has that rank
  // (ranks are unique per pair and ids only ever grow into longer tokens).
  const size_t n = word.size();
  std::vector<int32_t> ids(n);
  std::vector<uint32_t> next(n), prev(n);
  std::vector<uint64_t> heap;
  heap.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    ids[k] = byte_ids_[static_cast<uint8_t>(word[k])];
    next[k] = static_cast<uint32_t>(k + 1);
    prev[k] = static_cast<uint32_t>(k - 1);  // wraps for k = 0: never read
  }
  auto push = [&](size_t pos, uint32_t rank) { heap.push_back((uint64_t{rank} << 32) | pos); };
  for (size_t k = 0; k + 1 < n; ++k) {
    uint32_t r = find_rank(ids[k], ids[k + 1]);
    if (r != no_rank) push(k, r);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    uint64_t top = heap.back();
    heap.pop_back();
    size_t pos = static_cast<uint32_t>(top);
    uint32_t rank = static_cast<uint32_t>(top >> 32);
    if (ids[pos] < 0) continue;  // absorbed by its left neighbour
    size_t q = next[pos];
    if (q >= n) continue;
    if (find_rank(ids[pos], ids[q]) != rank) continue;  // stale: the pair at pos has changed
    ids[pos] = merged_by_rank_[rank];
    ids[q] = -1;
    next[pos] = next[q];
    if (next[q] < n) prev[next[q]] = static_cast<uint32_t>(pos);
    if (pos > 0) {
      size_t pp = prev[pos];
      uint32_t left = find_rank(ids[pp], ids[pos]);
      if (left != no_rank) {
        push(pp, left);
        std::push_heap(heap.begin(), heap.end(), std::greater<>{});
      }
    }
    if (next[pos] < n) {
      uint32_t right = find_rank(ids[pos], ids[next[pos]]);
      if (right != no_rank) {
        push(pos, right);
        std::push_heap(heap.begin(), heap.end(), std::greater<>{});
      }
    }
  }
  for (size_t k = 0; k < n; k = next[k]) out.push_back(ids[k]);
}

namespace {

// Per-thread scratch of the long-word loop, reused so repeated long words pay no allocation
// or page faults; released after very long words. Buckets are found by rank through a dense
// index and the next rank to process by a bitmap scan (ranks only grow), so a word costs
// O(n) plus a scan of num_merges / 64 words.
struct bucket_scratch {
  struct symbol {
    int32_t id;
    uint32_t next, prev;
  };
  struct bucket {
    bool sorted = true;
    std::vector<uint32_t> positions;
  };
  std::vector<symbol> symbols;
  std::vector<int32_t> index;   // rank -> bucket, -1 when the rank has none
  std::vector<uint64_t> queued;  // bitmap of ranks with an unprocessed bucket
  std::vector<bucket> pool;      // bucket objects, recycled through `free_list`
  std::vector<int32_t> free_list;
  std::vector<uint32_t> positions;

  static bucket_scratch& local() {
    thread_local bucket_scratch s;
    return s;
  }
  void reset(size_t n, size_t num_ranks) {
    symbols.resize(n);
    if (index.size() < num_ranks) {
      index.assign(num_ranks, -1);
      queued.assign(num_ranks / 64 + 1, 0);
    }
  }
  void release_if_huge() {
    if (symbols.size() > (size_t{1} << 22)) {
      symbols = {};
      pool = {};
      free_list.clear();
      positions = {};
    }
  }
  size_t bucket_of(uint32_t rank) {
    int32_t b = index[rank];
    if (b >= 0) return static_cast<size_t>(b);
    if (free_list.empty()) {
      free_list.push_back(static_cast<int32_t>(pool.size()));
      pool.emplace_back();
    }
    b = free_list.back();
    free_list.pop_back();
    index[rank] = b;
    queued[rank >> 6] |= uint64_t{1} << (rank & 63);
    pool[static_cast<size_t>(b)].sorted = true;
    pool[static_cast<size_t>(b)].positions.clear();
    return static_cast<size_t>(b);
  }
  void add(size_t b, uint32_t pos) {
    bucket& bk = pool[b];
    if (!bk.positions.empty() && bk.positions.back() > pos) bk.sorted = false;
    bk.positions.push_back(pos);
  }
  // Smallest queued rank >= from, or UINT32_MAX.
  uint32_t next_queued(uint32_t from) const {
    size_t w = from >> 6;
    if (w >= queued.size()) return UINT32_MAX;
    uint64_t bits = queued[w] & (~uint64_t{0} << (from & 63));
    while (true) {
      if (bits) return static_cast<uint32_t>((w << 6) + static_cast<size_t>(std::countr_zero(bits)));
      if (++w >= queued.size()) return UINT32_MAX;
      bits = queued[w];
    }
  }
  // Takes rank's positions (sorted) into `positions` and frees its bucket.
  void take(uint32_t rank) {
    size_t b = static_cast<size_t>(index[rank]);
    positions.clear();
    positions.swap(pool[b].positions);
    if (!pool[b].sorted) std::sort(positions.begin(), positions.end());
    index[rank] = -1;
    queued[rank >> 6] &= ~(uint64_t{1} << (rank & 63));
    free_list.push_back(static_cast<int32_t>(b));
  }
  void abandon() {  // after a failed word: free whatever is still queued
    for (uint32_t r = next_queued(0); r != UINT32_MAX; r = next_queued(r + 1)) take(r);
  }
};

}  // namespace

bool bpe_model::encode_word_buckets(std::string_view word, std::vector<int32_t>& out) const {
  // The heap's order is (rank, position). A merge of rank r only makes pairs that contain the
  // new, longer token, and in a trained merge list those come after r (a token is merged only
  // once it exists). So ranks can be taken in increasing order, each with its positions
  // left to right, and no pair waits in a heap: each rank's positions are a bucket, filled
  // before the rank is reached. A pair of lower rank than the merge making it breaks that
  // order: then this returns false and the heap does the word.
  const size_t n = word.size();
  bucket_scratch& sc = bucket_scratch::local();
  sc.reset(n, num_merges_);
  auto& sym = sc.symbols;
  using symbol_ref = bucket_scratch::symbol;
  for (size_t k = 0; k < n; ++k)
    sym[k] = {byte_ids_[static_cast<uint8_t>(word[k])], static_cast<uint32_t>(k + 1), static_cast<uint32_t>(k - 1)};
  auto add = [&](uint32_t rank, uint32_t pos) { sc.add(sc.bucket_of(rank), pos); };
  for (size_t k = 0; k + 1 < n; ++k) {
    uint32_t r = find_rank(sym[k].id, sym[k + 1].id);
    if (r != no_rank) add(r, static_cast<uint32_t>(k));
  }
  bool ok = true;
  for (uint32_t rank = sc.next_queued(0); ok && rank != UINT32_MAX; rank = sc.next_queued(rank + 1)) {
    sc.take(rank);
    const size_t count = sc.positions.size();
    for (size_t j = 0; j < count; ++j) {
      // Positions are known ahead: prefetch their symbols, then (once those are in) the merge
      // slot of their pair, so long words out of cache are not bound by memory latency.
      if (j + 16 < count) __builtin_prefetch(&sym[sc.positions[j + 16]]);
      if (j + 8 < count) {
        const symbol_ref s8 = sym[sc.positions[j + 8]];
        if (s8.id >= 0 && s8.next < n) prefetch_merge(s8.id, sym[s8.next].id);
      }
      const uint32_t pos = sc.positions[j];
      if (sym[pos].id < 0) continue;
      const uint32_t q = sym[pos].next;
      if (q >= n) continue;
      if (find_rank(sym[pos].id, sym[q].id) != rank) continue;  // stale
      const int32_t made = merged_by_rank_[rank];
      sym[pos].id = made;
      sym[q].id = -1;
      sym[pos].next = sym[q].next;
      if (sym[q].next < n) sym[sym[q].next].prev = pos;
      if (pos > 0) {
        uint32_t pp = sym[pos].prev;
        uint32_t left = find_rank(sym[pp].id, made);
        if (left != no_rank) {
          if (left < rank) {
            ok = false;
            break;
          }
          add(left, pp);
        }
      }
      if (sym[pos].next < n) {
        const uint32_t q2 = sym[pos].next;
        // If the right neighbour merges at this same rank further on, the pair made now is
        // stale before its turn; that merge queues the pair that counts.
        if (sym[q2].next < n && find_rank(sym[q2].id, sym[sym[q2].next].id) == rank) continue;
        uint32_t right = find_rank(made, sym[q2].id);
        if (right != no_rank) {
          if (right < rank) {
            ok = false;
            break;
          }
          add(right, pos);
        }
      }
    }
  }
  if (ok) {  // a sequential scan: following `next` would be a chain of dependent loads
    for (size_t k = 0; k < n; ++k)
      if (sym[k].id >= 0) out.push_back(sym[k].id);
  } else {
    sc.abandon();
  }
  sc.release_if_huge();
  return ok;
}

}  // namespace troupe::tok
