// An in-process kv_store for tests and single-process benchmarks, with switchable faults
// (down, slow) so the logic above it can be tested without a Redis server.
#pragma once

#include <mutex>
#include <unordered_map>

#include "runtime/prefix/kv_store.hpp"

namespace troupe::prefix {

class memory_kv_store final : public kv_store {
 public:
  store_status exists(std::span<const std::string> keys, std::vector<uint8_t>& found,
                      store_clock::time_point deadline) override;
  store_status get(std::span<const std::string> keys, std::vector<std::optional<stored_value>>& values,
                   std::chrono::seconds refresh_ttl, store_clock::time_point deadline) override;
  store_status put(std::span<const std::string> keys, std::span<const std::string_view> values,
                   std::chrono::seconds ttl, size_t& written, store_clock::time_point deadline) override;
  std::string describe() const override { return "memory"; }

  // Faults: while down every call is `unavailable`; a latency makes each call sleep that long
  // first (returning `timeout`, after sleeping only until the deadline, when it would pass it).
  void set_down(bool down);
  void set_latency(std::chrono::microseconds latency);
  // Direct access for tests: overwrite or remove an entry, read one, count them.
  void raw_set(const std::string& key, std::string value);
  bool raw_erase(const std::string& key);
  std::optional<std::string> raw_get(const std::string& key) const;
  std::optional<std::chrono::seconds> raw_ttl(const std::string& key) const;
  size_t size() const;
  int64_t num_calls() const;

 private:
  store_status enter(store_clock::time_point deadline);

  struct entry {
    std::shared_ptr<const std::string> value;
    std::chrono::seconds ttl{0};
    store_clock::time_point expires;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, entry> map_;
  bool down_ = false;
  std::chrono::microseconds latency_{0};
  int64_t calls_ = 0;
};

}  // namespace troupe::prefix
