// Entries by key within a byte budget, the least recently used dropped first: what the Responses
// API's stores (responses, conversations) share. Each entry's cost is the caller's measure. Not
// thread-safe: the stores lock around it.
#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace troupe::wire::openai {

template <class V>
class lru_bytes {
 public:
  explicit lru_bytes(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Stores (or replaces) `key`, most recently used, then drops the least recently used until the
  // total fits. An entry costing more than max_bytes alone is not kept (false; an earlier entry of
  // `key` is gone too).
  bool put(const std::string& key, V value, size_t bytes) {
    erase(key);
    if (bytes > max_bytes_) return false;
    lru_.push_front(key);
    map_.emplace(key, slot{std::move(value), bytes, lru_.begin()});
    bytes_ += bytes;
    while (bytes_ > max_bytes_) erase(lru_.back());  // never the one just put: it fits alone
    return true;
  }
  // The entry, now the most recently used; null when unknown or dropped.
  V* get(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return &it->second.value;
  }
  bool erase(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    map_.erase(it);
    return true;
  }

  size_t bytes() const noexcept { return bytes_; }
  size_t size() const noexcept { return map_.size(); }
  size_t max_bytes() const noexcept { return max_bytes_; }

 private:
  struct slot {
    V value;
    size_t bytes = 0;
    std::list<std::string>::iterator lru;  // its place in lru_ (front: most recent)
  };
  const size_t max_bytes_;
  std::unordered_map<std::string, slot> map_;
  std::list<std::string> lru_;
  size_t bytes_ = 0;
};

}  // namespace troupe::wire::openai
