#include "runtime/prefix/prefix_metrics.hpp"

#include "runtime/core/prometheus.hpp"

namespace troupe::prefix {

using prometheus::family;
using prometheus::sample;

void prefix_metrics::set_local(const prefix_stats& s) {
  std::lock_guard lock(mu_);
  local_ = s;
}

void prefix_metrics::set_fetch(const remote_stats& s, const store_health& h) {
  std::lock_guard lock(mu_);
  fetch_ = s;
  fetch_health_ = h;
  remote_seen_ = true;
}

void prefix_metrics::set_publish(const remote_stats& s, const store_health& h) {
  std::lock_guard lock(mu_);
  publish_ = s;
  publish_health_ = h;
  remote_seen_ = true;
}

prefix_stats prefix_metrics::local() const {
  std::lock_guard lock(mu_);
  return local_;
}
remote_stats prefix_metrics::fetch() const {
  std::lock_guard lock(mu_);
  return fetch_;
}
remote_stats prefix_metrics::publish() const {
  std::lock_guard lock(mu_);
  return publish_;
}

double prefix_metrics::hit_rate() const {
  std::lock_guard lock(mu_);
  return local_.query_tokens > 0 ? static_cast<double>(local_.hit_tokens) / static_cast<double>(local_.query_tokens) : 0.0;
}

void prefix_metrics::render(std::string& out, const std::string& labels) const {
  const double rate = hit_rate();
  std::lock_guard lock(mu_);
  family(out, "prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache (each request once, at its first admission).");
  sample(out, "prefix_cache_queries_total", labels, "", static_cast<double>(local_.query_tokens));
  family(out, "prefix_cache_hits_total", "counter", "Of those, prompt tokens whose KV was reused (local or shared store).");
  sample(out, "prefix_cache_hits_total", labels, "", static_cast<double>(local_.hit_tokens));
  family(out, "prefix_cache_hit_rate", "gauge", "prefix_cache_hits_total / prefix_cache_queries_total since start.");
  sample(out, "prefix_cache_hit_rate", labels, "", rate);
  family(out, "prefix_cache_requests_total", "counter", "Requests looked up in the prefix cache.");
  sample(out, "prefix_cache_requests_total", labels, "", static_cast<double>(local_.num_queries));
  family(out, "prefix_cache_request_hits_total", "counter", "Requests that reused at least one cached block.");
  sample(out, "prefix_cache_request_hits_total", labels, "", static_cast<double>(local_.num_hits));
  family(out, "prefix_cache_cached_blocks", "gauge", "KV blocks holding a cached prefix block now (in use or evictable).");
  sample(out, "prefix_cache_cached_blocks", labels, "", static_cast<double>(local_.cached_blocks));
  family(out, "prefix_cache_evicted_blocks_total", "counter", "Cached blocks reused for new content (least recently used first).");
  sample(out, "prefix_cache_evicted_blocks_total", labels, "", static_cast<double>(local_.evicted_blocks));
  if (!remote_seen_ && !cost_) return;

  family(out, "prefix_cache_remote_hit_tokens_total", "counter", "Prompt tokens whose KV was loaded from the shared store.");
  sample(out, "prefix_cache_remote_hit_tokens_total", labels, "", static_cast<double>(local_.remote_hit_tokens));
  family(out, "prefix_cache_remote_lookups_total", "counter",
         "Shared-store look-ups by decision: fetch, recompute (cost model), not_found, unavailable.");
  for (int d = 0; d < kNumFetchDecisions; ++d)
    sample(out, "prefix_cache_remote_lookups_total", labels,
           "decision=\"" + std::string(to_string(static_cast<fetch_decision>(d))) + "\"",
           static_cast<double>(fetch_.decisions[static_cast<size_t>(d)]));
  family(out, "prefix_cache_remote_blocks_total", "counter", "Shared-store blocks: looked_up, found, fetched (checked).");
  sample(out, "prefix_cache_remote_blocks_total", labels, "stage=\"looked_up\"", static_cast<double>(fetch_.blocks_looked_up));
  sample(out, "prefix_cache_remote_blocks_total", labels, "stage=\"found\"", static_cast<double>(fetch_.blocks_found));
  sample(out, "prefix_cache_remote_blocks_total", labels, "stage=\"fetched\"", static_cast<double>(fetch_.blocks_fetched));
  family(out, "prefix_cache_remote_rejected_total", "counter",
         "Shared-store entries refused by a check (and recomputed), by reason.");
  for (int r = 1; r < kNumCheckStatus; ++r)
    sample(out, "prefix_cache_remote_rejected_total", labels,
           "reason=\"" + std::string(to_string(static_cast<check_status>(r))) + "\"",
           static_cast<double>(fetch_.rejected[static_cast<size_t>(r)]));
  family(out, "prefix_cache_remote_bytes_total", "counter", "Bytes read from and written to the shared store.");
  sample(out, "prefix_cache_remote_bytes_total", labels, "direction=\"read\"", static_cast<double>(fetch_.bytes_fetched));
  sample(out, "prefix_cache_remote_bytes_total", labels, "direction=\"written\"", static_cast<double>(publish_.bytes_written));
  family(out, "prefix_cache_remote_published_blocks_total", "counter",
         "Filled blocks offered for publishing: written, present (already stored), dropped (queue full).");
  sample(out, "prefix_cache_remote_published_blocks_total", labels, "outcome=\"written\"", static_cast<double>(publish_.blocks_written));
  sample(out, "prefix_cache_remote_published_blocks_total", labels, "outcome=\"present\"", static_cast<double>(publish_.blocks_present));
  sample(out, "prefix_cache_remote_published_blocks_total", labels, "outcome=\"dropped\"", static_cast<double>(publish_dropped_.load()));
  family(out, "prefix_cache_redis_up", "gauge", "1 while the look-up connection to Redis is established.");
  sample(out, "prefix_cache_redis_up", labels, "", fetch_health_.connected ? 1.0 : 0.0);
  family(out, "prefix_cache_redis_events_total", "counter",
         "Redis connection events of the look-up and publish connections.");
  const std::pair<const char*, int64_t> events[] = {
      {"connect", fetch_health_.connects + publish_health_.connects},
      {"connect_failure", fetch_health_.connect_failures + publish_health_.connect_failures},
      {"disconnect", fetch_health_.disconnects + publish_health_.disconnects},
      {"timeout", fetch_health_.timeouts + publish_health_.timeouts},
      {"error_reply", fetch_health_.error_replies + publish_health_.error_replies}};
  for (const auto& [kind, n] : events)
    sample(out, "prefix_cache_redis_events_total", labels, std::string("event=\"") + kind + "\"", static_cast<double>(n));
  if (cost_) {
    family(out, "prefix_cache_estimated_fetch_bytes_per_second", "gauge", "The cost model's Redis bandwidth estimate.");
    sample(out, "prefix_cache_estimated_fetch_bytes_per_second", labels, "", cost_->bytes_per_s());
    family(out, "prefix_cache_estimated_prefill_tokens_per_second", "gauge", "The cost model's prefill speed estimate.");
    sample(out, "prefix_cache_estimated_prefill_tokens_per_second", labels, "", cost_->prefill_tokens_per_s());
  }
}

}  // namespace troupe::prefix
