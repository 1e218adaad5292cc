// vLLM's request log: the admitted line names the prompt's length and the settings that are set
// (never the prompt's text), the ended line the reason, tokens and timings.
#include <boost/test/unit_test.hpp>

#include "runtime/serve/request_log.hpp"

using namespace troupe;
using namespace troupe::serve;

BOOST_AUTO_TEST_SUITE(request_log)

BOOST_AUTO_TEST_CASE(admitted_line) {
  built_request b;
  b.prompt = {1, 2, 3};
  b.max_tokens = 16;
  b.sampling.temperature = 0.7f;
  BOOST_TEST(received_line("chatcmpl-1", std::nullopt, b, "") ==
             "Received request chatcmpl-1: prompt 3 tokens, max_tokens 16, temperature 0.70");
  b.sampling.top_p = 0.95f;
  b.sampling.top_k = 20;
  b.sampling.seed = 7;
  b.sampling.has_seed = true;
  BOOST_TEST(received_line("r", 1, b, "sql") ==
             "Received request r#1: prompt 3 tokens, max_tokens 16, temperature 0.70, top_p 0.95, top_k 20, seed 7, "
             "adapter 'sql'");
}

BOOST_AUTO_TEST_CASE(ended_line) {
  wire::done_event d;
  d.id = "r";
  d.reason = wire::finish_reason::length;
  d.usage = {143, 0, 52};
  d.timings = {1.25, 45.0, 812.34};
  BOOST_TEST(finished_line(d) ==
             "Finished request r: length, prompt 143 tokens, output 52 tokens, queue 1.2 ms, first token 45.0 ms, "
             "total 812.3 ms");
  d.index = 2;
  d.reason = wire::finish_reason::error;
  d.usage.cached_prompt_tokens = 128;
  d.error = wire::wire_error{wire::error_code::internal, "the executor failed", {}};
  BOOST_TEST(finished_line(d) ==
             "Finished request r#2: error, prompt 143 tokens (128 cached), output 52 tokens, queue 1.2 ms, first "
             "token 45.0 ms, total 812.3 ms, error: the executor failed");
}

BOOST_AUTO_TEST_SUITE_END()
