// The load generator over the OpenAI-compatible API: the same requests as run_load, each on its
// own HTTP connection (HTTP/1.1 answers one request at a time per connection), streamed from
// POST /v1/completions as server-sent events. Results have the same meaning as run_load's, so the
// two protocols can be compared on one server in one run.
#pragma once

#include "bench/serving/load.hpp"

namespace troupe::bench {

std::vector<load_result> run_load_http(uint16_t http_port, const std::vector<load_request>& reqs, int max_concurrency);

}  // namespace troupe::bench
