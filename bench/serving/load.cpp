#include "bench/serving/load.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "examples/cpp/troupe_client.hpp"

namespace troupe::bench {

using clock = std::chrono::steady_clock;

void assign_arrivals(std::vector<load_request>& reqs, double rate, std::mt19937_64& rng) {
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  double t = 0;
  for (auto& r : reqs) {
    r.arrival_s = rate > 0 ? t : 0.0;
    if (rate > 0) t += gap(rng);
  }
}

std::vector<load_result> run_load(uint16_t port, const std::vector<load_request>& reqs, int max_concurrency,
                                  int until) {
  client::connection conn("127.0.0.1", port);
  std::vector<load_result> out(reqs.size());
  std::map<std::string, size_t> index;
  auto t0 = clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  size_t next = 0, done = 0;
  int in_flight = 0;
  while (done < reqs.size()) {
    while (next < reqs.size() && in_flight < max_concurrency && reqs[next].arrival_s <= now_s()) {
      wire::generate_request g;
      g.id = "b" + std::to_string(next);
      g.kind = wire::prompt_kind::ids;
      g.prompt_ids = reqs[next].prompt;
      g.max_tokens = reqs[next].max_tokens;
      g.ignore_eos = true;
      g.sampling.temperature = 0.0;
      out[next].sent_s = now_s();
      index[g.id] = next;
      conn.send(g);
      ++next;
      ++in_flight;
    }
    double wait_s = 0.2;
    if (next < reqs.size() && in_flight < max_concurrency) wait_s = std::max(0.0, reqs[next].arrival_s - now_s());
    auto ev = conn.next_event(std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
    if (!ev) continue;
    double t = now_s();
    if (auto* tok = std::get_if<wire::token_event>(&*ev)) {
      size_t i = index.at(tok->id);
      auto& r = out[i];
      if (r.first_token_s < 0) r.first_token_s = t;
      r.token_s.push_back(t);
      if (static_cast<int>(i) == until) return out;
    } else if (auto* d = std::get_if<wire::done_event>(&*ev)) {
      auto& r = out[index.at(d->id)];
      r.done_s = t;
      r.completion_tokens = d->usage.completion_tokens;
      r.finish_reason = std::string(wire::to_string(d->reason));
      ++done;
      --in_flight;
    } else if (auto* e = std::get_if<wire::wire_error>(&*ev)) {
      throw std::runtime_error("request " + e->id + " refused: " + e->message);
    }
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto k = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

load_summary summarize(const std::vector<load_result>& results) {
  load_summary s;
  std::vector<double> ttft, itl, e2e;
  double start = 1e300, end = 0;
  for (const auto& r : results) {
    start = std::min(start, r.sent_s);
    end = std::max(end, r.done_s);
    s.output_tokens += r.completion_tokens;
    ttft.push_back((r.first_token_s - r.sent_s) * 1e3);
    e2e.push_back((r.done_s - r.sent_s) * 1e3);
    for (size_t i = 1; i < r.token_s.size(); ++i) itl.push_back((r.token_s[i] - r.token_s[i - 1]) * 1e3);
  }
  s.requests = static_cast<int64_t>(results.size());
  s.wall_s = end - start;
  s.req_per_s = static_cast<double>(s.requests) / s.wall_s;
  s.tok_per_s = static_cast<double>(s.output_tokens) / s.wall_s;
  s.ttft_p50_ms = percentile(ttft, 50);
  s.ttft_p99_ms = percentile(ttft, 99);
  s.itl_p50_ms = percentile(itl, 50);
  s.itl_p99_ms = percentile(itl, 99);
  s.e2e_p50_ms = percentile(e2e, 50);
  return s;
}

std::vector<double> itl_between(const std::vector<load_result>& results, double from_s, double to_s) {
  std::vector<double> gaps;
  for (const auto& r : results)
    for (size_t i = 1; i < r.token_s.size(); ++i)
      if (r.token_s[i] >= from_s && r.token_s[i] < to_s) gaps.push_back((r.token_s[i] - r.token_s[i - 1]) * 1e3);
  return gaps;
}

}  // namespace troupe::bench
