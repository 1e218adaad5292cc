#include "runtime/serve/stats_log.hpp"

#include <cstdio>

namespace troupe::serve {

std::optional<std::string> stats_log::next(const stats_sample& now) {
  const auto prev = last_;
  last_ = now;
  if (!prev || now.seconds <= prev->seconds) return std::nullopt;
  const double dt = now.seconds - prev->seconds;
  const int64_t prompt = now.prompt_tokens - prev->prompt_tokens;
  const int64_t generated = now.generation_tokens - prev->generation_tokens;
  const bool idle = prompt == 0 && generated == 0 && now.running == 0 && now.waiting == 0;
  const bool quiet = idle && last_idle_;
  last_idle_ = idle;
  if (quiet) return std::nullopt;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %lld reqs, "
                "Waiting: %lld reqs, KV cache usage: %.1f%%",
                static_cast<double>(prompt) / dt, static_cast<double>(generated) / dt,
                static_cast<long long>(now.running), static_cast<long long>(now.waiting), 100.0 * now.kv_cache_usage);
  std::string line = buf;
  if (now.prefix_caching) {
    // Over the interval's look-ups, as vLLM's recent-window rate; none in it: since start.
    int64_t q = now.prefix_query_tokens - prev->prefix_query_tokens, h = now.prefix_hit_tokens - prev->prefix_hit_tokens;
    if (q == 0) {
      q = now.prefix_query_tokens;
      h = now.prefix_hit_tokens;
    }
    std::snprintf(buf, sizeof buf, ", Prefix cache hit rate: %.1f%%", q > 0 ? 100.0 * static_cast<double>(h) / static_cast<double>(q) : 0.0);
    line += buf;
  }
  if (const int64_t p = now.preemptions - prev->preemptions; p > 0) line += ", Preemptions: " + std::to_string(p);
  return line;
}

}  // namespace troupe::serve
