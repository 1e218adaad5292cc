// A per-thread, direct-mapped cache from short pre-tokens to their BPE ids. Real text repeats
// its words, so most pre-tokens skip the merge loop. Per thread so encode() stays const and
// lock-free; entries carry the owning tokenizer's serial, so tokenizers never see each other's.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace troupe::tok {

class word_cache {
 public:
  static constexpr size_t max_key_bytes = 18;
  static constexpr size_t max_ids = 8;
  static constexpr size_t num_entries = 8192;  // 512 KiB per thread

  struct alignas(64) entry {
    uint64_t hash;
    uint32_t owner;  // 0: empty
    uint8_t key_len;
    uint8_t num_ids;
    char key[max_key_bytes];
    int32_t ids[max_ids];
  };
  static_assert(sizeof(entry) == 64);

  static word_cache& local();  // this thread's cache

  const entry* find(uint32_t owner, uint64_t hash, std::string_view key) const {
    const entry& e = entries_[hash & (num_entries - 1)];
    if (e.hash == hash && e.owner == owner && e.key_len == key.size() &&
        std::memcmp(e.key, key.data(), key.size()) == 0)
      return &e;
    return nullptr;
  }

  void store(uint32_t owner, uint64_t hash, std::string_view key, const int32_t* ids, size_t n) {
    if (key.size() > max_key_bytes || n > max_ids) return;
    entry& e = entries_[hash & (num_entries - 1)];
    e.hash = hash;
    e.owner = owner;
    e.key_len = static_cast<uint8_t>(key.size());
    e.num_ids = static_cast<uint8_t>(n);
    std::memcpy(e.key, key.data(), key.size());
    std::memcpy(e.ids, ids, n * sizeof(int32_t));
  }

 private:
  word_cache() : entries_(num_entries, entry{}) {}
  std::vector<entry> entries_;
};

// A new serial per tokenizer instance (never 0).
uint32_t next_word_cache_owner();

}  // namespace troupe::tok
