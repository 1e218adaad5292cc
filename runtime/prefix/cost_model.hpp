// Fetch or recompute: per request, loading k blocks from the shared store costs about
// round_trip + k * block_bytes / bandwidth, recomputing them k * block_tokens / prefill_speed.
// Both speeds are measured (exponentially weighted) from real fetches and real prefill steps,
// starting from stated priors. Thread-safe: the scheduler reports prefill, the fetcher decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace troupe::prefix {

struct cost_options {
  double prior_bytes_per_s = 1e9;          // loopback Redis moves ~1-2 GB/s of large values
  double prior_round_trip_s = 0.0005;
  double prior_prefill_tokens_per_s = 500; // replaced by the first measured prefill step
  double smoothing = 0.25;                 // weight of each new measurement
  double budget_safety = 0.8;              // plan to use at most this share of the fetch budget
};

struct fetch_plan {
  size_t num_blocks = 0;     // blocks to fetch (0: recompute everything)
  double fetch_s = 0;        // estimated time to fetch them
  double recompute_s = 0;    // estimated time to prefill them instead
  bool budget_limited = false;  // fewer than available: the budget would not fit them all
};

class cost_model {
 public:
  explicit cost_model(cost_options opts = {});

  // A pipelined GET of `bytes` took `seconds` (round trip included).
  void observe_fetch(size_t bytes, double seconds);
  // A small pipelined request (EXISTS) took `seconds`.
  void observe_round_trip(double seconds);
  // A prefill-bearing step computed `tokens` tokens in `seconds`.
  void observe_prefill(int64_t tokens, double seconds);

  // How many of the `available` leading blocks (each block_bytes long, block_tokens tokens) to
  // fetch within budget_s: all that fit when fetching a block is faster than recomputing it
  // (and the round trip is paid back), else none.
  fetch_plan decide(size_t available, size_t block_bytes, int32_t block_tokens, double budget_s) const;

  double bytes_per_s() const;
  double round_trip_s() const;
  double prefill_tokens_per_s() const;

 private:
  cost_options opts_;
  mutable std::mutex mu_;
  double bytes_per_s_, round_trip_s_, prefill_tokens_per_s_;
  bool prefill_measured_ = false, fetch_measured_ = false;
};

}  // namespace troupe::prefix
