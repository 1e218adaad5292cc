// vLLM's periodic log line (its log_stats): what the server did over the last interval, for
// operators who read the log rather than scrape Prometheus:
//   Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 16 reqs,
//   Waiting: 2 reqs, KV cache usage: 31.2%, Prefix cache hit rate: 47.0%
// Plain logic: the server's stats actor samples the metrics every [server] log_stats_interval_ms
// and prints what this returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace troupe::serve {

struct stats_sample {
  double seconds = 0;                                 // a monotonic clock's reading
  int64_t prompt_tokens = 0, generation_tokens = 0;  // counters since start
  int64_t preemptions = 0;                            // counter since start
  int64_t running = 0, waiting = 0;                   // requests now
  double kv_cache_usage = 0;                          // fraction of the KV pool in use now
  bool prefix_caching = false;
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;  // counters since start
};

class stats_log {
 public:
  // The line for the interval since the previous sample (none for the first). Quiet while the
  // server idles: after one line saying nothing happened (so the log shows the load ended),
  // nothing until tokens flow or requests run or wait again.
  std::optional<std::string> next(const stats_sample& now);

 private:
  std::optional<stats_sample> last_;
  bool last_idle_ = true;  // a server starts idle: no line until something happens
};

}  // namespace troupe::serve
