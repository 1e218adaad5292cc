#include "runtime/prefix/memory_kv_store.hpp"

#include <thread>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

store_status memory_kv_store::enter(store_clock::time_point deadline) {
  std::chrono::microseconds latency;
  {
    std::lock_guard lock(mu_);
    ++calls_;
    if (down_) return store_status::unavailable;
    latency = latency_;
  }
  if (latency.count() > 0) {
    auto wake = store_clock::now() + latency;
    if (wake > deadline) {
      std::this_thread::sleep_until(deadline);
      return store_status::timeout;
    }
    std::this_thread::sleep_until(wake);
  }
  return store_status::ok;
}

store_status memory_kv_store::exists(std::span<const std::string> keys, std::vector<uint8_t>& found,
                                     store_clock::time_point deadline) {
  if (auto s = enter(deadline); s != store_status::ok) return s;
  std::lock_guard lock(mu_);
  auto now = store_clock::now();
  found.assign(keys.size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = map_.find(keys[i]);
    found[i] = it != map_.end() && it->second.expires > now;
  }
  return store_status::ok;
}

store_status memory_kv_store::get(std::span<const std::string> keys, std::vector<std::optional<stored_value>>& values,
                                  std::chrono::seconds refresh_ttl, store_clock::time_point deadline) {
  if (auto s = enter(deadline); s != store_status::ok) return s;
  std::lock_guard lock(mu_);
  auto now = store_clock::now();
  values.assign(keys.size(), std::nullopt);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = map_.find(keys[i]);
    if (it == map_.end() || it->second.expires <= now) continue;
    if (refresh_ttl.count() > 0) {
      it->second.ttl = refresh_ttl;
      it->second.expires = now + refresh_ttl;
    }
    values[i] = stored_value{it->second.value, *it->second.value};
  }
  return store_status::ok;
}

store_status memory_kv_store::put(std::span<const std::string> keys, std::span<const std::string_view> values,
                                  std::chrono::seconds ttl, size_t& written, store_clock::time_point deadline) {
  TROUPE_ASSERT(keys.size() == values.size());
  written = 0;
  if (auto s = enter(deadline); s != store_status::ok) return s;
  std::lock_guard lock(mu_);
  auto now = store_clock::now();
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = map_.find(keys[i]);
    if (it != map_.end() && it->second.expires > now) continue;  // NX
    map_[keys[i]] = entry{std::make_shared<const std::string>(values[i]), ttl, now + ttl};
    ++written;
  }
  return store_status::ok;
}

void memory_kv_store::set_down(bool down) {
  std::lock_guard lock(mu_);
  down_ = down;
}

void memory_kv_store::set_latency(std::chrono::microseconds latency) {
  std::lock_guard lock(mu_);
  latency_ = latency;
}

void memory_kv_store::raw_set(const std::string& key, std::string value) {
  std::lock_guard lock(mu_);
  auto ttl = std::chrono::seconds(3600);
  map_[key] = entry{std::make_shared<const std::string>(std::move(value)), ttl, store_clock::now() + ttl};
}

bool memory_kv_store::raw_erase(const std::string& key) {
  std::lock_guard lock(mu_);
  return map_.erase(key) != 0;
}

std::optional<std::string> memory_kv_store::raw_get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return *it->second.value;
}

std::optional<std::chrono::seconds> memory_kv_store::raw_ttl(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second.ttl;
}

size_t memory_kv_store::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

int64_t memory_kv_store::num_calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

}  // namespace troupe::prefix
