// The load generator: requests with Poisson arrivals (or all at once) over one connection to a
// running server, at most `max_concurrency` outstanding; records when every token arrives.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace troupe::bench {

struct load_request {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 64;
  double arrival_s = 0;  // offset from the start of the run
};

struct load_result {
  double sent_s = 0, first_token_s = -1, done_s = -1;
  std::vector<double> token_s;  // arrival time of each token event
  int64_t completion_tokens = 0;
  std::string finish_reason;
};

struct load_summary {
  double wall_s = 0;
  int64_t requests = 0, output_tokens = 0;
  double req_per_s = 0, tok_per_s = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, itl_p50_ms = 0, itl_p99_ms = 0, e2e_p50_ms = 0;
};

// Poisson arrivals at `rate` req/s (rate <= 0: all at time 0).
void assign_arrivals(std::vector<load_request>& reqs, double rate, std::mt19937_64& rng);

// Runs the requests against 127.0.0.1:port; greedy, ignore_eos, streaming. With `until` >= 0 the
// run ends when request `until` has its first token: the connection closes and the server
// cancels whatever is left (results of unfinished requests keep the tokens seen so far).
std::vector<load_result> run_load(uint16_t port, const std::vector<load_request>& reqs, int max_concurrency,
                                  int until = -1);

double percentile(std::vector<double> v, double p);
load_summary summarize(const std::vector<load_result>& results);
// Inter-token gaps (ms) of the tokens that arrived in [from_s, to_s).
std::vector<double> itl_between(const std::vector<load_result>& results, double from_s, double to_s);

}  // namespace troupe::bench
