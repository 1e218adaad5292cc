// Metrics: the exact Prometheus text of a few series (names, labels, cumulative buckets).
#include <boost/test/unit_test.hpp>

#include "runtime/serve/metrics.hpp"

using namespace troupe::serve;

BOOST_AUTO_TEST_SUITE(metrics_suite)

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative) {
  histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.render(out, "x_seconds", "m=\"a\"");
  BOOST_TEST(out ==
             "troupe:x_seconds_bucket{m=\"a\",le=\"0.10000000000000001\"} 2\n"
             "troupe:x_seconds_bucket{m=\"a\",le=\"1\"} 3\n"
             "troupe:x_seconds_bucket{m=\"a\",le=\"+Inf\"} 4\n"
             "troupe:x_seconds_sum{m=\"a\"} 7.6500000000000004\n"
             "troupe:x_seconds_count{m=\"a\"} 4\n");
}

BOOST_AUTO_TEST_CASE(vllm_names_with_the_troupe_prefix) {
  metrics m("tiny \"dense\"");
  m.set_queue_sizes(3, 5);
  m.set_kv_cache_usage(0.25);
  m.add_preemptions(2);
  m.add_prompt_tokens(100);
  m.add_generation_tokens(7);
  m.add_finished(finished_reason_label::length);
  m.observe_ttft(0.02);
  auto t = m.render();
  auto has = [&](const std::string& line) {
    BOOST_TEST(t.find(line + "\n") != std::string::npos, "missing: " << line);
  };
  has("# TYPE troupe:num_requests_running gauge");
  has("troupe:num_requests_running{model_name=\"tiny \\\"dense\\\"\"} 3");
  has("troupe:num_requests_waiting{model_name=\"tiny \\\"dense\\\"\"} 5");
  has("troupe:kv_cache_usage_perc{model_name=\"tiny \\\"dense\\\"\"} 0.25");
  has("# TYPE troupe:num_preemptions_total counter");
  has("troupe:num_preemptions_total{model_name=\"tiny \\\"dense\\\"\"} 2");
  has("troupe:prompt_tokens_total{model_name=\"tiny \\\"dense\\\"\"} 100");
  has("troupe:generation_tokens_total{model_name=\"tiny \\\"dense\\\"\"} 7");
  has("troupe:request_success_total{model_name=\"tiny \\\"dense\\\"\",finished_reason=\"length\"} 1");
  has("# TYPE troupe:time_to_first_token_seconds histogram");
  has("troupe:time_to_first_token_seconds_count{model_name=\"tiny \\\"dense\\\"\"} 1");
  has("# TYPE troupe:inter_token_latency_seconds histogram");
  has("# TYPE troupe:e2e_request_latency_seconds histogram");
  has("# TYPE troupe:request_queue_time_seconds histogram");
  // vLLM's per-request histograms (a request never scheduled has no phase times).
  m.observe_finished({120, 7, 0.5, 2.0, 2.5, 16});
  m.observe_finished({3, 0, std::nullopt, std::nullopt, std::nullopt});
  m.add_step(0.1, 0.11, 64);
  t = m.render();
  const std::string l = "{model_name=\"tiny \\\"dense\\\"\"";
  has("# TYPE troupe:request_prompt_tokens histogram");
  has("troupe:request_prompt_tokens_count" + l + "} 2");
  has("troupe:request_prompt_tokens_sum" + l + "} 123");
  has("troupe:request_prompt_tokens_bucket" + l + ",le=\"5\"} 1");
  has("troupe:request_prompt_tokens_bucket" + l + ",le=\"200\"} 2");
  has("troupe:request_generation_tokens_sum" + l + "} 7");
  has("troupe:request_prefill_time_seconds_count" + l + "} 1");
  has("troupe:request_decode_time_seconds_sum" + l + "} 2");
  has("troupe:request_inference_time_seconds_sum" + l + "} 2.5");
  has("troupe:iteration_tokens_total_count" + l + "} 1");
  has("troupe:iteration_tokens_total_sum" + l + "} 64");
  has("troupe:request_params_max_tokens_count" + l + "} 1");  // the one with max_tokens
  has("troupe:request_params_max_tokens_bucket" + l + ",le=\"20\"} 1");
  has("troupe:request_params_max_tokens_bucket" + l + ",le=\"10\"} 0");
  // vLLM's request_params_n, the inter-token latency under its older name, and cache_config_info
  // once the pool is known.
  BOOST_TEST(t.find("troupe:cache_config_info") == std::string::npos);
  m.observe_request_n(1);
  m.observe_request_n(4);
  m.observe_max_generation_tokens(7);
  m.observe_inter_token(0.02);
  m.set_cache_config(16, 512, "auto", true);
  t = m.render();
  has("troupe:request_params_n_count" + l + "} 2");
  has("troupe:request_params_n_bucket" + l + ",le=\"2\"} 1");
  has("troupe:request_params_n_bucket" + l + ",le=\"5\"} 2");
  has("# TYPE troupe:request_max_num_generation_tokens histogram");
  has("troupe:request_max_num_generation_tokens_sum" + l + "} 7");
  has("# TYPE troupe:time_per_output_token_seconds histogram");
  has("troupe:time_per_output_token_seconds_count" + l + "} 1");
  has("troupe:inter_token_latency_seconds_count" + l + "} 1");
  has("troupe:cache_config_info" + l + ",block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
      "num_gpu_blocks=\"512\"} 1");
}

// Speculative decoding's counters, vLLM's names: per position, how often the draft there held
// (a step's accepted drafts are its first ones).
BOOST_AUTO_TEST_CASE(spec_decode_acceptance_per_position) {
  metrics m("m");
  m.add_spec_decode(4, 2);
  m.add_spec_decode(3, 3);
  m.add_spec_decode(2, 0);
  auto t = m.render();
  auto has = [&](const std::string& line) { BOOST_TEST(t.find(line + "\n") != std::string::npos, "missing: " << line); };
  has("troupe:spec_decode_num_drafts_total{model_name=\"m\"} 3");
  has("troupe:spec_decode_num_draft_tokens_total{model_name=\"m\"} 9");
  has("troupe:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 5");
  has("# TYPE troupe:spec_decode_num_accepted_tokens_per_pos counter");
  has("troupe:spec_decode_num_accepted_tokens_per_pos{model_name=\"m\",position=\"0\"} 2");
  has("troupe:spec_decode_num_accepted_tokens_per_pos{model_name=\"m\",position=\"1\"} 2");
  has("troupe:spec_decode_num_accepted_tokens_per_pos{model_name=\"m\",position=\"2\"} 1");
  has("troupe:spec_decode_num_accepted_tokens_per_pos{model_name=\"m\",position=\"3\"} 0");
  BOOST_TEST(t.find("position=\"4\"") == std::string::npos);
}

// The gateway's connections (troupe-specific): the open count as set last, the idle closes summed.
BOOST_AUTO_TEST_CASE(client_connections_and_idle_closes) {
  metrics m("m");
  m.set_client_connections(5);
  m.set_client_connections(3);
  m.add_idle_closed(2);
  m.add_idle_closed(1);
  auto t = m.render();
  BOOST_TEST(t.find("# TYPE troupe:client_connections gauge\n") != std::string::npos);
  BOOST_TEST(t.find("troupe:client_connections{model_name=\"m\"} 3\n") != std::string::npos, t);
  BOOST_TEST(t.find("# TYPE troupe:idle_connections_closed_total counter\n") != std::string::npos);
  BOOST_TEST(t.find("troupe:idle_connections_closed_total{model_name=\"m\"} 3\n") != std::string::npos, t);
}

// vLLM's lora_requests_info: the adapters in the labels, the time as the value; absent without
// adapters, so a server without LoRA renders what it did before.
BOOST_AUTO_TEST_CASE(lora_requests_info_only_with_adapters) {
  metrics m("m");
  BOOST_TEST(m.render().find("lora_requests_info") == std::string::npos);
  m.set_lora_requests(2, "sql,chat", "");
  const auto t = m.render();
  BOOST_TEST(t.find("# TYPE troupe:lora_requests_info gauge\n") != std::string::npos, t);
  const std::string line =
      "troupe:lora_requests_info{model_name=\"m\",max_lora=\"2\",running_lora_adapters=\"sql,chat\","
      "waiting_lora_adapters=\"\"} ";
  const auto at = t.find(line);
  BOOST_REQUIRE(at != std::string::npos);
  const double when = std::stod(t.substr(at + line.size()));
  BOOST_TEST(when > 1.7e9);  // Unix seconds (2023 on)
}

BOOST_AUTO_TEST_SUITE_END()
