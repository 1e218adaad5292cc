// Byte-level BPE: the vocabulary as raw byte strings, merges as a hash from (left id, right id)
// to (rank, merged id), and the merge loop. Ties on rank go to the leftmost pair, exactly as
// Hugging Face's Word::merge_all orders its heap (rank, then position).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/hash.hpp"

namespace troupe::tok {

class bpe_model {
 public:
  static constexpr uint32_t no_rank = UINT32_MAX;
  // Words up to this many bytes use the array scan (O(n^2) compares, no allocation); longer
  // ones a heap over a linked list (O(n log n)); from long_word_bytes on, buckets by rank
  // (O(n) when ranks grow along merge chains, as in every trained BPE; else the heap).
  static constexpr size_t small_word_bytes = 48;
  static constexpr size_t long_word_bytes = 1024;

  struct merge {
    uint32_t rank = no_rank;
    int32_t id = -1;
  };

  // Building (the tokenizer.json reader calls these). Ids may have holes.
  void reserve(size_t num_tokens, size_t num_merges);
  // `bytes` are the raw bytes of the token; `byte_level` is false for a vocabulary string outside
  // the ByteLevel alphabet, which BPE can never produce (it only decodes, as its UTF-8 text).
  void add_token(int32_t id, std::string_view bytes, bool byte_level = true) {
    add_token(id, bytes, byte_level, hash_token(bytes));
  }
  void add_token(int32_t id, std::string_view bytes, bool byte_level, uint64_t hash);
  // Loading touches the tables at random; the reader prefetches a batch ahead.
  void prefetch_token_slot(uint64_t hash) const {
    if (!lookup_.empty()) __builtin_prefetch(&lookup_[static_cast<size_t>(hash) & (lookup_.size() - 1)], 1);
  }
  void prefetch_merge_slot(int32_t left, int32_t right) const {
    __builtin_prefetch(&merge_slots_[slot_of(pair_key(left, right))], 1);
  }
  // Next merge by rank; throws errc::invalid_checkpoint naming `where` when a part or the
  // merged string is not in the vocabulary.
  void add_merge(std::string_view left, std::string_view right, const std::string& where);
  // The same with the parts' ids already known (the reader resolves them in batches).
  void add_merge_ids(int32_t left, int32_t right, int32_t merged);
  // find_token for n keys at once, -1 where absent. Loading is bound by cache misses into the
  // 4 MiB lookup table and the token bytes; staging them with prefetches overlaps the misses.
  void find_tokens(const std::string_view* keys, const uint64_t* hashes, size_t n, int32_t* ids) const;
  void set_ignore_merges(bool v) { ignore_merges_ = v; }
  // Checks every single byte has a token and freezes the tables.
  void finish(const std::string& where);

  std::optional<int32_t> token_id(std::string_view bytes) const { return find_token(bytes, hash_token(bytes)); }
  std::optional<int32_t> find_token(std::string_view bytes, uint64_t hash) const;
  static uint64_t hash_token(std::string_view bytes) { return hash_bytes(bytes); }
  bool has_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < spans_.size() && spans_[static_cast<size_t>(id)].len != absent;
  }
  std::string_view token_bytes(int32_t id) const {  // has_id(id) must hold
    const span& s = spans_[static_cast<size_t>(id)];
    return std::string_view(blob_).substr(s.off, s.len);
  }
  int32_t byte_id(uint8_t b) const { return byte_ids_[b]; }
  size_t id_limit() const { return spans_.size(); }  // one past the largest id
  size_t num_tokens() const { return num_tokens_; }
  size_t num_merges() const { return num_merges_; }

  void prefetch_merge(int32_t left, int32_t right) const {
    __builtin_prefetch(&merge_slots_[slot_of(pair_key(left, right))]);
  }
  // Rank of the merge of (left, right), or no_rank. The hot lookup of encoding: 8-byte slots
  // (pair and rank packed) keep Qwen3's table at 2 MiB.
  uint32_t find_rank(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    const size_t mask = merge_slots_.size() - 1;
    for (size_t i = slot_of(key);; i = (i + 1) & mask) {
      const uint64_t s = merge_slots_[i];
      if ((s >> rank_bits) == key) return static_cast<uint32_t>(s & rank_mask);
      if (s == empty_slot) return no_rank;
    }
  }
  int32_t merged_id(uint32_t rank) const { return merged_by_rank_[rank]; }
  merge find_merge(int32_t left, int32_t right) const {
    uint32_t r = find_rank(left, right);
    return r == no_rank ? merge{} : merge{r, merged_by_rank_[r]};
  }

  // Appends the ids of one pre-token (raw bytes, non-empty).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // The two strategies, public so the tests can check they agree.
  void encode_word_small(std::string_view word, std::vector<int32_t>& out) const;
  void encode_word_heap(std::string_view word, std::vector<int32_t>& out) const;
  // False (out untouched) when a merge makes a pair of lower rank than its own: then the heap
  // must order the merges.
  bool encode_word_buckets(std::string_view word, std::vector<int32_t>& out) const;

 private:
  static constexpr uint32_t absent = UINT32_MAX;
  // A slot packs (left id, right id, rank) as 21 + 21 + 22 bits; all ones is empty.
  static constexpr int id_bits = 21;
  static constexpr int rank_bits = 22;
  static constexpr uint64_t rank_mask = (uint64_t{1} << rank_bits) - 1;
  static constexpr uint64_t empty_slot = UINT64_MAX;
 public:
  static constexpr size_t max_token_ids = (size_t{1} << id_bits) - 1;  // the last id is reserved
  static constexpr size_t max_merges = (size_t{1} << rank_bits) - 1;
 private:
  struct span {
    uint32_t off = 0;
    uint32_t len = absent;
  };
  static uint64_t pair_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << id_bits) | static_cast<uint32_t>(r);
  }
  size_t slot_of(uint64_t key) const {  // the high bits of a multiplicative hash
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> merge_shift_);
  }
  struct lookup_slot {
    uint64_t hash = 0;
    int32_t id = -1;  // -1: empty
  };
  bool insert_lookup(int32_t id, uint64_t hash);  // false: the same bytes are already there
  void grow_lookup();
  void rehash_merges(size_t capacity);

  std::string blob_;            // all token bytes, back to back
  std::vector<span> spans_;     // id -> bytes in blob_
  std::vector<lookup_slot> lookup_;  // open addressing, keyed by the token's bytes
  size_t lookup_count_ = 0;
  std::vector<uint64_t> merge_slots_;
  std::vector<int32_t> merged_by_rank_;  // rank -> the token the merge makes
  int merge_shift_ = 64;
  size_t num_tokens_ = 0;
  size_t num_merges_ = 0;
  int32_t byte_ids_[256];
  bool ignore_merges_ = false;
};

}  // namespace troupe::tok
