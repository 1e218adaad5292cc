// vLLM's request log (--enable-log-requests): one line when a generate's completion is admitted
// (its prompt's length, never its text, and how it samples) and one when it ends (why, tokens,
// timings). For operators following single requests through a server's stderr; off by default
// ([server] log_requests).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/serve/request_builder.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

// "Received request ID[#i]: prompt 143 tokens, max_tokens 512, temperature 0.70, top_p 0.95,
// top_k 20, seed 7, adapter 'sql'" (unset settings left out).
std::string received_line(std::string_view id, std::optional<int32_t> index, const built_request& b,
                          std::string_view adapter);

// "Finished request ID[#i]: stop, prompt 143 tokens (128 cached), output 52 tokens, queue 1.2 ms,
// first token 45.0 ms, total 812.3 ms[, error: ...]".
std::string finished_line(const wire::done_event& d);

}  // namespace troupe::serve
