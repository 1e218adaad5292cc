// The prefix cache's Prometheus metrics (text format 0.0.4, `troupe:` names as the server's): the
// local hit rate (vLLM's prefix_cache_queries / prefix_cache_hits, in tokens), every shared-store
// decision and rejection, and the cost model's current estimates. Thread-safe: the scheduler and
// the prefix-cache actors push snapshots of their own counters; the metrics endpoint renders.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/prefix/cost_model.hpp"
#include "runtime/prefix/prefix_cache.hpp"
#include "runtime/prefix/remote_cache.hpp"

namespace troupe::prefix {

// Connection health of one store client (redis_counters without the hiredis header).
struct store_health {
  bool connected = false;
  int64_t connects = 0, connect_failures = 0, disconnects = 0, timeouts = 0, error_replies = 0;
};

class prefix_metrics {
 public:
  // cost may be null (no shared store).
  explicit prefix_metrics(std::shared_ptr<const cost_model> cost = nullptr) : cost_(std::move(cost)) {}

  void set_local(const prefix_stats& s);
  void set_fetch(const remote_stats& s, const store_health& h);
  void set_publish(const remote_stats& s, const store_health& h);
  void add_publish_dropped(int64_t blocks) { publish_dropped_ += blocks; }

  prefix_stats local() const;
  remote_stats fetch() const;
  remote_stats publish() const;
  int64_t publish_dropped() const noexcept { return publish_dropped_.load(); }
  // hits / queries in tokens; 0 before the first query.
  double hit_rate() const;

  // Appends the metric families; `labels` as the server's ("model_name=\"x\"").
  void render(std::string& out, const std::string& labels) const;

 private:
  std::shared_ptr<const cost_model> cost_;
  mutable std::mutex mu_;
  prefix_stats local_;
  remote_stats fetch_, publish_;
  store_health fetch_health_, publish_health_;
  bool remote_seen_ = false;
  std::atomic<int64_t> publish_dropped_{0};
};

}  // namespace troupe::prefix
