// End to end over real TCP: many concurrent streams each get exactly the tokens the request gets
// alone from the generator (`troupe generate`), greedy and seeded — also when a tiny KV pool
// forces preemption; and every KV block comes back.
#include "tests/actors/e2e_fixture.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <sys/socket.h>

using namespace troupe;
using namespace troupe::e2e;

namespace {

struct outcome {
  std::vector<int32_t> streamed_ids;  // concatenated token events
  wire::done_event done;
};

// `per_conn` requests on each of `conns` connections, all sent before any is read.
std::map<std::string, outcome> run_concurrently(uint16_t port, const std::vector<wire::generate_request>& reqs,
                                                int conns) {
  std::map<std::string, outcome> results;
  std::mutex mu;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(conns));
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      try {
        client::client cl("127.0.0.1", port);
        std::vector<client::stream> streams;
        for (size_t i = static_cast<size_t>(c); i < reqs.size(); i += static_cast<size_t>(conns))
          streams.push_back(cl.generate(reqs[i]));
        for (auto& s : streams) {
          outcome o;
          while (auto t = s.next()) o.streamed_ids.insert(o.streamed_ids.end(), t->ids.begin(), t->ids.end());
          o.done = s.done();
          std::lock_guard lock(mu);
          results[s.id()] = o;
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(c)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) BOOST_TEST(e.empty(), e);
  return results;
}

void expect_reference(const std::vector<wire::generate_request>& reqs, const std::map<std::string, outcome>& got) {
  for (const auto& r : reqs) {
    BOOST_TEST_CONTEXT("request " << r.id << (r.sampling.seed ? " (seeded)" : " (greedy)")) {
      auto it = got.find(r.id);
      BOOST_REQUIRE(it != got.end());
      auto ref = reference(tiny_dense(), r);
      BOOST_TEST(it->second.streamed_ids == ref, boost::test_tools::per_element());
      BOOST_TEST((it->second.done.reason == wire::finish_reason::length));
      BOOST_TEST(it->second.done.usage.completion_tokens == static_cast<int64_t>(ref.size()));
      BOOST_TEST(it->second.done.usage.prompt_tokens == static_cast<int64_t>(r.prompt_ids.size()));
      BOOST_TEST(it->second.done.timings.total_ms >= it->second.done.timings.ttft_ms);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_streams)

BOOST_AUTO_TEST_CASE(thirty_two_concurrent_streams_match_generate_alone) {
  auto srv = start(test_config());
  std::mt19937 rng(11);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 32; ++i)
    reqs.push_back(ids_request("r" + std::to_string(i), random_prompt(rng, 60), 8 + static_cast<int32_t>(rng() % 17),
                               i % 2 ? 100 + i : -1));
  auto got = run_concurrently(srv->port(), reqs, 4);
  expect_reference(reqs, got);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  BOOST_TEST(metric(*srv, "generation_tokens_total") > 0);
  // vLLM's per-request histograms: one observation a request, their sums the requests' tokens,
  // the phases adding up; one iteration_tokens observation a step, summing to the steps' tokens.
  BOOST_TEST(eventually([&] { return metric(*srv, "request_prompt_tokens_count") == 32; }));
  double prompt = 0, output = 0;
  for (const auto& r : reqs) {
    prompt += static_cast<double>(r.prompt_ids.size());
    output += *r.max_tokens;
  }
  BOOST_TEST(metric(*srv, "request_prompt_tokens_sum") == prompt);
  BOOST_TEST(metric(*srv, "request_generation_tokens_sum") == output);
  BOOST_TEST(metric(*srv, "request_generation_tokens_sum") == metric(*srv, "generation_tokens_total"));
  for (const char* phase : {"prefill", "decode", "inference"})
    BOOST_TEST(metric(*srv, std::string("request_") + phase + "_time_seconds_count") == 32, phase);
  BOOST_TEST(metric(*srv, "request_inference_time_seconds_sum") >= metric(*srv, "request_decode_time_seconds_sum"));
  BOOST_TEST(std::abs(metric(*srv, "request_inference_time_seconds_sum") -
                      metric(*srv, "request_prefill_time_seconds_sum") - metric(*srv, "request_decode_time_seconds_sum")) < 1e-6);
  BOOST_TEST(metric(*srv, "iteration_tokens_total_sum") == metric(*srv, "engine_step_tokens_total"));
  BOOST_TEST(metric(*srv, "iteration_tokens_total_count") == metric(*srv, "engine_steps_total"));
}

BOOST_AUTO_TEST_CASE(a_tiny_kv_pool_forces_preemption_and_every_output_is_still_right) {
  auto c = test_config();
  c.max_model_len = 64;
  c.num_kv_blocks = 4;  // one max_model_len sequence
  auto srv = start(c);
  std::mt19937 rng(12);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 12; ++i)
    reqs.push_back(ids_request("p" + std::to_string(i), random_prompt(rng, 30), 6 + static_cast<int32_t>(rng() % 15),
                               i % 3 ? 200 + i : -1));
  auto got = run_concurrently(srv->port(), reqs, 3);
  expect_reference(reqs, got);
  BOOST_TEST_MESSAGE("preemptions: " << metric(*srv, "num_preemptions_total"));
  BOOST_TEST(metric(*srv, "num_preemptions_total") > 0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(chunked_prefill_and_non_streaming_answers) {
  auto c = test_config();
  c.max_num_batched_tokens = 16;  // prompts of up to 120 tokens are prefilled in chunks
  auto srv = start(c);
  std::mt19937 rng(13);
  client::client cl("127.0.0.1", srv->port());
  std::vector<std::pair<wire::generate_request, client::stream>> running;
  for (int i = 0; i < 6; ++i) {
    auto r = ids_request("n" + std::to_string(i), random_prompt(rng, 120), 10, i % 2 ? 7 : -1);
    r.stream = false;
    running.emplace_back(r, cl.generate(r));
  }
  for (auto& [r, s] : running) {
    BOOST_TEST(!s.next().has_value());  // no token events without streaming
    const auto& d = s.done();
    BOOST_TEST(d.has_output);
    BOOST_TEST(d.ids == reference(tiny_dense(), r), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(health_models_and_the_metrics_endpoint) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto h = cl.health();
  BOOST_TEST(h.status == "ok");
  auto m = cl.models();
  BOOST_REQUIRE_EQUAL(m.size(), 1u);
  BOOST_TEST(m[0].name == "tiny-dense");
  BOOST_TEST(m[0].max_model_len == 256);
  BOOST_TEST(m[0].vocab_size == 4096);
  cl.complete(ids_request("warm", {1, 2, 3}, 4));
  // A plain HTTP GET, as Prometheus does it.
  client::connection http("127.0.0.1", srv->metrics_port());
  http.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string body;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(http.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    body.append(buf, static_cast<size_t>(n));
  }
  BOOST_TEST(body.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  for (const char* name : {"troupe:num_requests_running{", "troupe:num_requests_waiting{", "troupe:kv_cache_usage_perc{",
                           "troupe:num_preemptions_total{", "troupe:prompt_tokens_total{",
                           "troupe:generation_tokens_total{", "troupe:time_to_first_token_seconds_bucket{",
                           "troupe:inter_token_latency_seconds_bucket{", "troupe:e2e_request_latency_seconds_bucket{",
                           "troupe:request_queue_time_seconds_bucket{"})
    BOOST_TEST(body.find(name) != std::string::npos, "missing " << name);
  BOOST_TEST(body.find("troupe:generation_tokens_total{model_name=\"tiny-dense\"} 4\n") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
