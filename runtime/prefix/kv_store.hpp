// The shared block store as the prefix cache sees it: pipelined existence checks, reads and
// writes with a deadline. Implementations: redis_kv_store (hiredis) and memory_kv_store (tests).
// Expected failures (store down, too slow) are statuses, never exceptions: the store only ever
// accelerates, and a caller that gets anything but ok recomputes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::prefix {

using store_clock = std::chrono::steady_clock;

enum class store_status : uint8_t {
  ok,
  unavailable,  // not connected (down, refused, backing off before the next attempt)
  timeout,      // the deadline passed; the connection was dropped
  error,        // the server answered with an error (auth, wrong type, out of memory)
};
std::string_view to_string(store_status s) noexcept;

// Bytes returned by a store, kept alive by `owner` (a Redis reply, a string): no copy on reads.
struct stored_value {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};

class kv_store {
 public:
  virtual ~kv_store() = default;
  // found[i] = whether keys[i] exists. One round trip.
  virtual store_status exists(std::span<const std::string> keys, std::vector<uint8_t>& found,
                              store_clock::time_point deadline) = 0;
  // values[i] = keys[i]'s value or nullopt. refresh_ttl > 0 also resets each found key's TTL to
  // it (hot prefixes outlive cold ones). One round trip.
  virtual store_status get(std::span<const std::string> keys, std::vector<std::optional<stored_value>>& values,
                           std::chrono::seconds refresh_ttl, store_clock::time_point deadline) = 0;
  // Sets keys[i] = values[i] with a TTL of `ttl`, leaving existing keys alone (SET ... EX NX).
  // `written` counts the keys actually set. One round trip.
  virtual store_status put(std::span<const std::string> keys, std::span<const std::string_view> values,
                           std::chrono::seconds ttl, size_t& written, store_clock::time_point deadline) = 0;
  // "redis unix:///tmp/x.sock db 0", "memory": for logs.
  virtual std::string describe() const = 0;
};

}  // namespace troupe::prefix
