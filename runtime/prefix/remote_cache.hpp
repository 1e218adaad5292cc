// The shared-store side of the prefix cache, as plain calls the prefix-cache actor makes on its
// own thread: fetch() finds how much of a lookup's chain the store holds, lets the cost model
// decide, reads and checks those blocks within a deadline; publish() writes newly filled blocks
// the store lacks. Every failure degrades to "recompute": nothing here can change an output.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/prefix/block_codec.hpp"
#include "runtime/prefix/cost_model.hpp"
#include "runtime/prefix/kv_store.hpp"
#include "runtime/prefix/prefix_cache.hpp"

namespace troupe::prefix {

enum class lookup_strategy : uint8_t {
  pipelined,      // EXISTS for every block in one round trip; the leading run of hits
  binary_search,  // log2(n) single EXISTS round trips, assuming the stored blocks form a prefix
};

struct remote_options {
  std::string ns = "troupe";
  std::chrono::seconds ttl{3600};                  // every entry expires (Redis memory stays bounded)
  std::chrono::milliseconds fetch_budget{1000};    // longest a request waits for the store
  std::chrono::milliseconds publish_budget{2000};  // longest one publish round may take
  lookup_strategy strategy = lookup_strategy::pipelined;
  size_t max_fetch_bytes = size_t{1} << 30;        // per request
  size_t fetch_window_bytes = size_t{64} << 20;    // per pipelined GET: what a timeout can cost
  bool refresh_ttl_on_hit = true;                  // a fetched entry lives another ttl
};

enum class fetch_decision : uint8_t {
  fetch,        // blocks were loaded (possibly fewer than found: budget, a bad entry)
  recompute,    // found, but the cost model says prefilling them is faster (or none fit the budget)
  not_found,    // the store holds none of the blocks
  unavailable,  // the store is down, timed out or answered with an error
};
inline constexpr int kNumFetchDecisions = 4;
std::string_view to_string(fetch_decision d) noexcept;

struct fetch_result {
  remote_blocks blocks;
  fetch_decision decision = fetch_decision::not_found;
  size_t num_found = 0;  // leading blocks the store claimed to hold
  fetch_plan plan;       // the cost model's estimate for them
  double lookup_s = 0;   // finding num_found (EXISTS round trips)
  double read_s = 0;     // GETs and checks
  size_t bytes_read = 0;
};

struct remote_stats {
  int64_t num_lookups = 0;
  std::array<int64_t, kNumFetchDecisions> decisions{};
  int64_t blocks_looked_up = 0;
  int64_t blocks_found = 0;
  int64_t blocks_fetched = 0;  // passed every check
  int64_t bytes_fetched = 0;
  std::array<int64_t, kNumCheckStatus> rejected{};  // entries refused, by reason (ok unused)
  int64_t store_failures = 0;  // calls that returned anything but ok
  int64_t blocks_offered = 0;  // publish: blocks handed in
  int64_t blocks_present = 0;  // ... already in the store
  int64_t blocks_written = 0;  // ... written
  int64_t bytes_written = 0;
  int64_t rejected_total() const noexcept;
};

class remote_cache {
 public:
  // `store` and `cost` must outlive this object. Throws troupe::error(invalid_argument) for a bad
  // namespace or identity.
  remote_cache(kv_store& store, block_codec codec, const cache_identity& id, remote_options opts, cost_model& cost);

  fetch_result fetch(const remote_lookup& q, store_clock::time_point deadline);
  // Writes the blocks the store lacks; returns how many were written.
  size_t publish(std::span<const saved_block> blocks, store_clock::time_point deadline);

  std::string key(const block_hash& h) const { return store_key(opts_.ns, key_component_, h); }
  const block_codec& codec() const noexcept { return codec_; }
  const remote_options& options() const noexcept { return opts_; }
  remote_stats stats() const noexcept { return stats_; }

 private:
  store_status leading_run(std::span<const std::string> keys, size_t& run, store_clock::time_point deadline);

  kv_store& store_;
  block_codec codec_;
  std::string key_component_;
  remote_options opts_;
  cost_model& cost_;
  remote_stats stats_;
};

}  // namespace troupe::prefix
