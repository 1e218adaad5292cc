#include "runtime/serve/request_log.hpp"

#include <cstdio>

namespace troupe::serve {

namespace {

std::string who(std::string_view id, std::optional<int32_t> index) {
  std::string s(id);
  if (index) s += "#" + std::to_string(*index);
  return s;
}

std::string fixed(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

std::string received_line(std::string_view id, std::optional<int32_t> index, const built_request& b,
                          std::string_view adapter) {
  const auto& s = b.sampling;
  std::string line = "Received request " + who(id, index) + ": prompt " + std::to_string(b.prompt.size()) +
                     " tokens, max_tokens " + std::to_string(b.max_tokens) + ", temperature " +
                     fixed("%.2f", s.temperature);
  if (s.top_p < 1.0f) line += ", top_p " + fixed("%.2f", s.top_p);
  if (s.top_k > 0) line += ", top_k " + std::to_string(s.top_k);
  if (s.has_seed) line += ", seed " + std::to_string(s.seed);
  if (!adapter.empty()) line += ", adapter '" + std::string(adapter) + "'";
  return line;
}

std::string finished_line(const wire::done_event& d) {
  std::string line = "Finished request " + who(d.id, d.index) + ": " + std::string(wire::to_string(d.reason)) +
                     ", prompt " + std::to_string(d.usage.prompt_tokens) + " tokens";
  if (d.usage.cached_prompt_tokens > 0) line += " (" + std::to_string(d.usage.cached_prompt_tokens) + " cached)";
  line += ", output " + std::to_string(d.usage.completion_tokens) + " tokens, queue " +
          fixed("%.1f", d.timings.queue_ms) + " ms, first token " + fixed("%.1f", d.timings.ttft_ms) + " ms, total " +
          fixed("%.1f", d.timings.total_ms) + " ms";
  if (d.error) line += ", error: " + d.error->message;
  return line;
}

}  // namespace troupe::serve
