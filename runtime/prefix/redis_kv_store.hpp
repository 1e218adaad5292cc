// kv_store over one Redis connection (hiredis 0.14, synchronous). Never blocks past a call's
// deadline: the socket is non-blocking and every wait is a poll() bounded by it. A failed or
// timed-out connection is dropped and retried with exponential back-off; until then calls return
// `unavailable` at once. Not thread-safe: one object per thread (the prefix-cache actor's).
#pragma once

#include <chrono>
#include <memory>

#include "runtime/prefix/kv_store.hpp"
#include "runtime/prefix/redis_url.hpp"

namespace troupe::prefix {

struct redis_options {
  redis_url url;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds backoff_initial{100};  // after the first failure
  std::chrono::milliseconds backoff_max{5000};     // doubling up to this
};

struct redis_counters {
  int64_t connects = 0;          // connections established (AUTH/SELECT passed)
  int64_t connect_failures = 0;  // refused, timed out, or AUTH/SELECT rejected
  int64_t disconnects = 0;       // established connections dropped after an I/O error or timeout
  int64_t timeouts = 0;          // calls that hit their deadline
  int64_t error_replies = 0;     // error replies (OOM, NOAUTH, WRONGTYPE, ...)
  int64_t skipped_backoff = 0;   // calls answered `unavailable` without trying (backing off)
};

class redis_kv_store final : public kv_store {
 public:
  // Does not connect: the first call does (a Redis that is down at start is not an error).
  explicit redis_kv_store(redis_options opts);
  ~redis_kv_store() override;
  redis_kv_store(const redis_kv_store&) = delete;
  redis_kv_store& operator=(const redis_kv_store&) = delete;

  store_status exists(std::span<const std::string> keys, std::vector<uint8_t>& found,
                      store_clock::time_point deadline) override;
  store_status get(std::span<const std::string> keys, std::vector<std::optional<stored_value>>& values,
                   std::chrono::seconds refresh_ttl, store_clock::time_point deadline) override;
  store_status put(std::span<const std::string> keys, std::span<const std::string_view> values,
                   std::chrono::seconds ttl, size_t& written, store_clock::time_point deadline) override;
  std::string describe() const override;

  // PING; connects first when needed (and the back-off allows).
  store_status ping(store_clock::time_point deadline);
  bool connected() const noexcept;
  // When the next connection attempt is allowed (in the past when it is now).
  store_clock::time_point next_attempt() const noexcept;
  redis_counters counters() const noexcept;
  // Drops the connection (next call reconnects without waiting for the back-off).
  void disconnect();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::prefix
