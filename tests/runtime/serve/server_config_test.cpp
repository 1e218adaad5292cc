// Server config: defaults, TOML overlay, --set overrides, and an error naming the key for each
// kind of bad input. Also checks that config/troupe.toml (the documented file) parses and
// states the built-in defaults.
#include <boost/test/unit_test.hpp>

#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"
#include "runtime/serve/server_config.hpp"

using namespace troupe::serve;

namespace {
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    BOOST_FAIL("expected an error containing '" << needle << "'");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos,
               "'" << e.what() << "' should contain '" << needle << "'");
  }
}
}  // namespace

BOOST_AUTO_TEST_SUITE(server_config_suite)

BOOST_AUTO_TEST_CASE(toml_overlays_only_the_keys_present) {
  server_config c;
  apply_toml(c, "[scheduler]\nmax_num_seqs = 8\npolicy = \"priority\"\n[kv_cache]\nnum_kv_blocks = 40\n", "t.toml");
  BOOST_TEST(c.max_num_seqs == 8);
  BOOST_TEST(c.policy == "priority");
  BOOST_TEST(c.num_kv_blocks == 40);
  BOOST_TEST(c.max_num_batched_tokens == server_config{}.max_num_batched_tokens);
  validate(c);
}

BOOST_AUTO_TEST_CASE(set_overrides) {
  server_config c;
  apply_override(c, "server.port=9000");
  apply_override(c, "server.host=0.0.0.0");
  apply_override(c, "scheduler.static_batching=true");
  apply_override(c, "kv_cache.kv_cache_memory_bytes=123456789");
  BOOST_TEST(c.port == 9000);
  BOOST_TEST(c.host == "0.0.0.0");
  BOOST_TEST(c.static_batching);
  BOOST_TEST(c.kv_cache_memory_bytes == 123456789);
  BOOST_TEST(c.tensor_parallel_size == 1);
  apply_override(c, "model.tensor_parallel_size=2");
  apply_override(c, "model.threads=4");
  BOOST_TEST(c.threads == 4);
  BOOST_TEST(c.tensor_parallel_size == 2);
  BOOST_TEST(!c.enable_expert_parallel);
  apply_override(c, "model.enable_expert_parallel=true");
  BOOST_TEST(c.enable_expert_parallel);
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_key) {
  server_config c;
  expect_error([&] { apply_toml(c, "[scheduler]\nmax_num_seq = 8\n", "t.toml"); },
               "t.toml: unknown key 'max_num_seq' in [scheduler]");
  expect_error([&] { apply_toml(c, "[sched]\nx = 1\n", "t.toml"); }, "unknown section [sched]");
  expect_error([&] { apply_toml(c, "[server]\nport = \"80\"\n", "t.toml"); }, "server.port must be an integer");
  expect_error([&] { apply_toml(c, "[server]\nport = 70000\n", "t.toml"); },
               "server.port = 70000 is out of range; expected 0..65535");
  expect_error([&] { apply_toml(c, "[server\n", "t.toml"); }, "t.toml: line 1");
  expect_error([&] { apply_override(c, "max_num_seqs=3"); }, "expected section.key=value");
  expect_error([&] { apply_override(c, "scheduler.max_num_seqs=0"); }, "scheduler.max_num_seqs = 0 is out of range");
  expect_error([&] { apply_override(c, "model.threads=-1"); }, "model.threads = -1 is out of range");
  expect_error([&] { apply_override(c, "scheduler.max_prefill_tokens_while_decoding=-1"); },
               "scheduler.max_prefill_tokens_while_decoding = -1 is out of range");
  expect_error([&] { apply_override(c, "scheduler.decode_slowdown_percent=-5"); },
               "scheduler.decode_slowdown_percent = -5 is out of range");
  expect_error([&] { apply_override(c, "scheduler.enable_chunked_prefill=1"); }, "must be true or false");
  expect_error([&] { apply_override(c, "model.tensor_parallel_size=0"); },
               "model.tensor_parallel_size = 0 is out of range; expected 1..256");
  expect_error([&] { apply_override(c, "scheduler.enable_chunked_prefill=yes"); }, "could not determine value type");
  expect_error([&] { load_file(c, "/nonexistent/troupe.toml"); }, "cannot read config file /nonexistent/troupe.toml");
  c.policy = "lottery";
  expect_error([&] { validate(c); }, "scheduler.policy = 'lottery'");
  c.policy = "fcfs";
  c.quantization = "int4";
  expect_error([&] { validate(c); }, "model.quantization (--quantization)");
  c.quantization = "int8";
  c.kv_cache_dtype = "bf16";
  expect_error([&] { validate(c); }, "--kv-cache-dtype: 'bf16' is not one of");
  c.kv_cache_dtype = "fp8";
  validate(c);
  c.compute_dtype = "fp16";
  expect_error([&] { validate(c); }, "model.compute_dtype (--compute-dtype): 'fp16' is not one of f32, bf16");
  apply_override(c, "model.compute_dtype=bf16");
  validate(c);
  apply_override(c, "server.actor_scheduling=polling");
  expect_error([&] { validate(c); }, "server.actor_scheduling = 'polling'; expected sharing or stealing");
  apply_override(c, "server.actor_scheduling=stealing");
  validate(c);
  apply_override(c, "model.tool_call_parser=mistral");
  expect_error([&] { validate(c); }, "model.tool_call_parser = 'mistral'; expected auto, hermes or qwen3_coder");
  apply_override(c, "model.tool_call_parser=qwen3_coder");
  validate(c);
}

// bf16 compute's K/V are keyed apart from f32's, and each by the machine's arithmetic for it.
BOOST_AUTO_TEST_CASE(compute_dtype_enters_the_prefix_arithmetic) {
  server_config c;
  BOOST_TEST(compute_arithmetic(c) == (std::string(troupe::kernels::f32_arithmetic()) == "amx" ? "f32-amx" : ""));
  apply_override(c, "model.compute_dtype=bf16");
  const std::string a = compute_arithmetic(c);
  BOOST_TEST((a == "bf16-amx" || a == "bf16-vdpbf16ps"), a);
  BOOST_TEST(a == "bf16-" + std::string(troupe::kernels::bf16_arithmetic()));
  c.compute_dtype = "f16";
  BOOST_CHECK_THROW(compute_arithmetic(c), troupe::error);
}

BOOST_AUTO_TEST_CASE(speculative_keys_and_their_errors) {
  server_config c;
  BOOST_TEST(c.num_speculative_tokens == 0);  // off unless asked for
  apply_toml(c, "[speculative]\nnum_tokens = 4\nprompt_lookup_min = 3\nprompt_lookup_max = 5\n", "t.toml");
  BOOST_TEST(c.num_speculative_tokens == 4);
  BOOST_TEST(c.prompt_lookup_min == 3);
  BOOST_TEST(c.prompt_lookup_max == 5);
  validate(c);
  expect_error([&] { apply_override(c, "speculative.num_tokens=65"); }, "speculative.num_tokens = 65 is out of range");
  expect_error([&] { apply_override(c, "speculative.prompt_lookup_min=0"); },
               "speculative.prompt_lookup_min = 0 is out of range");
  apply_override(c, "speculative.prompt_lookup_min=6");
  expect_error([&] { validate(c); },
               "speculative.prompt_lookup_min (6) must be <= speculative.prompt_lookup_max (5)");
}

BOOST_AUTO_TEST_CASE(reasoning_effort_budgets_and_their_errors) {
  server_config c;
  BOOST_TEST(parse_effort_budgets(c.reasoning_effort_budgets).empty());  // none unless asked for
  apply_toml(c, "[model]\nreasoning_effort_budgets = \"low=1024,medium=8192,,high=-1\"\n", "t.toml");
  const auto b = parse_effort_budgets(c.reasoning_effort_budgets);
  const std::vector<std::pair<std::string, int32_t>> expected = {{"low", 1024}, {"medium", 8192}, {"high", -1}};
  BOOST_TEST((b == expected));
  validate(c);
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"low", "'low' is not EFFORT=TOKENS"},
           {"=5", "'=5' is not EFFORT=TOKENS"},
           {"low=", "'low=': TOKENS must be a count >= 0, or -1 for no budget"},
           {"low=-2", "'low=-2': TOKENS must be a count >= 0, or -1 for no budget"},
           {"low=1k", "'low=1k': TOKENS must be a count >= 0, or -1 for no budget"},
           {"none=5", "'none' turns thinking off; it takes no budget"},
           {"low=1,low=2", "effort 'low' is given twice"}}) {
    c.reasoning_effort_budgets = bad;
    expect_error([&] { validate(c); }, "config: model.reasoning_effort_budgets (--reasoning-effort-budgets): " + why);
  }
}

// vLLM's --speculative-config JSON: a model means draft_model, ngram keeps prompt lookup, and what
// Troupe cannot honour is refused by name (never silently dropped).
BOOST_AUTO_TEST_CASE(speculative_config_json_and_its_errors) {
  server_config c;
  apply_speculative_config(c, R"({"model": "/m/qwen3-0.6b", "num_speculative_tokens": 5, "disable_by_batch_size": 8})");
  BOOST_TEST(c.speculative_model == "/m/qwen3-0.6b");
  BOOST_TEST(c.num_speculative_tokens == 5);
  BOOST_TEST(c.speculative_disable_by_batch_size == 8);
  validate(c);
  apply_speculative_config(c, R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 3, "prompt_lookup_max": 5})");
  BOOST_TEST(c.speculative_model.empty());
  BOOST_TEST(c.num_speculative_tokens == 3);
  BOOST_TEST(c.prompt_lookup_min == 3);
  BOOST_TEST(c.prompt_lookup_max == 5);
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "expected a JSON object"},
           {"{", "not JSON"},
           {R"({"model": "/m", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 1})",
            "unknown key 'draft_tensor_parallel_size'"},
           {R"({"method": "eagle", "model": "/m", "num_speculative_tokens": 4})", "method 'eagle' is not one Troupe runs"},
           {R"({"method": "draft_model", "num_speculative_tokens": 4})", "method 'draft_model' needs \"model\""},
           {R"({"method": "ngram", "model": "/m", "num_speculative_tokens": 4})", "method 'ngram' (prompt lookup) takes no model"},
           {R"({"model": "/m"})", "num_speculative_tokens is required"},
           {R"({"model": "/m", "num_speculative_tokens": 0})", "num_speculative_tokens must be an integer from 1 to 64"},
           {R"({"model": "/m", "num_speculative_tokens": "4"})", "num_speculative_tokens must be an integer from 1 to 64"},
           {R"({"model": 7, "num_speculative_tokens": 4})", "model must be a directory name"},
           {R"({"model": "/m", "num_speculative_tokens": 4, "disable_by_batch_size": -1})",
            "disable_by_batch_size must be an integer >= 0"}}) {
    server_config d;
    expect_error([&] { apply_speculative_config(d, bad); }, "--speculative-config: " + why);
  }
  server_config d;
  d.speculative_model = "/m";
  expect_error([&] { validate(d); }, "speculative.model (--speculative-model) needs speculative.num_tokens");
  d.num_speculative_tokens = 2;
  d.device = "cuda";
  expect_error([&] { validate(d); }, "a draft model runs on the CPU device only");
}

BOOST_AUTO_TEST_CASE(lora_modules_and_their_errors) {
  server_config c;
  BOOST_TEST(parse_lora_modules(c.lora_modules).empty());  // none unless asked for
  apply_toml(c, "[model]\nlora_modules = \"sql=/a/sql,chat=/b/c=d,\"\n", "t.toml");
  const auto m = parse_lora_modules(c.lora_modules);
  BOOST_REQUIRE_EQUAL(m.size(), 2u);
  BOOST_TEST(m[0].first == "sql");
  BOOST_TEST(m[0].second == "/a/sql");
  BOOST_TEST(m[1].first == "chat");
  BOOST_TEST(m[1].second == "/b/c=d");  // the first '=' splits; an empty entry is skipped
  validate(c);
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"sql", "'sql' is not NAME=DIR"},
           {"=/a", "'=/a' is not NAME=DIR"},
           {"sql=", "'sql=' is not NAME=DIR"},
           {"my sql=/a", "adapter name 'my sql' must be at most 128 bytes without white space"},
           {"a=/x,a=/y", "adapter name 'a' is given twice"}}) {
    c.lora_modules = bad;
    expect_error([&] { validate(c); }, "config: model.lora_modules (--lora): " + why);
  }
  c = server_config{};
  BOOST_TEST((c.max_loras == 0 && c.max_lora_rank == 0));  // no cap, any rank
  apply_toml(c, "[model]\nmax_loras = 2\nmax_lora_rank = 16\n", "t.toml");
  BOOST_TEST((c.max_loras == 2 && c.max_lora_rank == 16));
  expect_error([&] { apply_override(c, "model.max_loras=-1"); }, "model.max_loras = -1 is out of range");
  expect_error([&] { apply_override(c, "model.max_lora_rank=-8"); }, "model.max_lora_rank = -8 is out of range");
  BOOST_TEST(server_config{}.responses_store_bytes == int64_t{64} << 20);
  apply_override(c, "server.responses_store_bytes=0");  // none kept
  BOOST_TEST(c.responses_store_bytes == 0);
  expect_error([&] { apply_override(c, "server.responses_store_bytes=-1"); },
               "server.responses_store_bytes = -1 is out of range");
  BOOST_TEST(server_config{}.generation_config == "auto");
  apply_toml(c, "[model]\ngeneration_config = \"vllm\"\noverride_generation_config = '{\"temperature\": 0.5}'\n", "t.toml");
  BOOST_TEST(c.generation_config == "vllm");
  BOOST_TEST(c.override_generation_config == R"({"temperature": 0.5})");
  BOOST_TEST(server_config{}.max_background_responses == 256);
  apply_override(c, "server.max_background_responses=0");  // none served
  BOOST_TEST(c.max_background_responses == 0);
  expect_error([&] { apply_override(c, "server.max_background_responses=-1"); },
               "server.max_background_responses = -1 is out of range");
}

// vLLM's --served-model-name takes several names: the first answers, the others are aliases.
BOOST_AUTO_TEST_CASE(served_model_names_and_their_errors) {
  BOOST_TEST(parse_served_model_names("").empty());
  BOOST_TEST((parse_served_model_names("qwen3-coder,claude-sonnet-4-5,claude-haiku-4-5") ==
              std::vector<std::string>{"qwen3-coder", "claude-sonnet-4-5", "claude-haiku-4-5"}));
  server_config c;
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"a,,b", "'' is not a name"}, {"a,", "'' is not a name"}, {"my model", "'my model' is not a name"},
           {"a,b,a", "'a' is given twice"}}) {
    c.served_model_name = bad;
    expect_error([&] { validate(c); }, "model.served_model_name (--served-model-name): " + why);
  }
}

// CORS: off by default (no origins; vLLM's "*" for methods and headers), lists in either form, and
// a bad list stops the start naming the key.
BOOST_AUTO_TEST_CASE(cors_keys_and_their_errors) {
  server_config c;
  auto p = cors_policy_of(c);
  BOOST_TEST(!p.enabled());
  BOOST_TEST(p.any_method());
  BOOST_TEST(p.any_header());
  BOOST_TEST(!p.allow_credentials);
  apply_toml(c,
             "[server]\nallowed_origins = '[\"https://a.example\"]'\nallowed_methods = \"GET, POST\"\n"
             "allow_credentials = true\n",
             "t.toml");
  p = cors_policy_of(c);
  BOOST_TEST((p.origins == std::vector<std::string>{"https://a.example"}));
  BOOST_TEST((p.methods == std::vector<std::string>{"GET", "POST"}));
  BOOST_TEST(p.allow_credentials);
  validate(c);
  c.allowed_headers = "[1]";
  expect_error([&] { validate(c); }, "config: server.allowed_headers (--allowed-headers): every entry must be a string");
}

// model.device: cpu or cuda; with cuda, each CPU-only feature is refused naming its key.
BOOST_AUTO_TEST_CASE(device_and_what_cuda_refuses) {
  server_config c;
  BOOST_TEST(c.device == "cpu");
  apply_override(c, "model.device=cuda");
  BOOST_TEST(c.device == "cuda");
  validate(c);
  apply_override(c, "model.quantization=fp8");  // the device runs FP8 weights
  validate(c);
  c.device = "gpu";
  expect_error([&] { validate(c); }, "config: model.device = 'gpu'; expected cpu or cuda");
  const std::pair<const char*, const char*> cpu_only[] = {
      {"model.tensor_parallel_size=2", "model.tensor_parallel_size = 2 (CPU shards)"},
      {"kv_cache.kv_cache_dtype=int8", "kv_cache.kv_cache_dtype = 'int8' (the device pool is float32)"},
      {"kv_cache.kv_cache_dtype=fp8", "kv_cache.kv_cache_dtype = 'fp8' (the device pool is float32)"},
      {"model.compute_dtype=bf16", "model.compute_dtype = 'bf16' (the device computes float32)"},
      {"model.lora_modules=a=/x", "model.lora_modules (LoRA adapters)"},
      {"server.allow_runtime_lora_updating=true", "server.allow_runtime_lora_updating (LoRA adapters)"},
      {"model.quantization=int8", "model.quantization = 'int8' (the device takes fp8)"},
  };
  for (const auto& [set, what] : cpu_only) {
    server_config d;
    apply_override(d, set);
    validate(d);  // fine on the CPU
    d.device = "cuda";
    expect_error([&] { validate(d); },
                 std::string("config: ") + what + ": with model.device = 'cuda' (--device cuda) this runs on the CPU only");
  }
  server_config f;
  f.kv_cache_dtype = "float32";  // auto's other spelling
  f.device = "cuda";
  validate(f);
}

BOOST_AUTO_TEST_CASE(the_documented_config_file_states_the_defaults) {
  server_config from_file;
  load_file(from_file, TROUPE_SOURCE_DIR "/config/troupe.toml");
  server_config d;
  BOOST_TEST(from_file.host == d.host);
  BOOST_TEST(from_file.port == d.port);
  BOOST_TEST(from_file.metrics_port == d.metrics_port);
  BOOST_TEST(from_file.max_frame_bytes == d.max_frame_bytes);
  BOOST_TEST(from_file.max_connections == d.max_connections);
  BOOST_TEST(from_file.max_requests_per_connection == d.max_requests_per_connection);
  BOOST_TEST(from_file.max_connection_buffer_bytes == d.max_connection_buffer_bytes);
  BOOST_TEST(from_file.shutdown_grace_ms == d.shutdown_grace_ms);
  BOOST_TEST(from_file.idle_timeout_ms == d.idle_timeout_ms);
  BOOST_TEST(from_file.tokenizer_workers == d.tokenizer_workers);
  BOOST_TEST(from_file.actor_threads == d.actor_threads);
  BOOST_TEST(from_file.actor_scheduling == d.actor_scheduling);
  BOOST_TEST(from_file.api_key == d.api_key);
  BOOST_TEST(from_file.allowed_origins == d.allowed_origins);
  BOOST_TEST(from_file.allowed_methods == d.allowed_methods);
  BOOST_TEST(from_file.allowed_headers == d.allowed_headers);
  BOOST_TEST(from_file.allow_credentials == d.allow_credentials);
  BOOST_TEST(from_file.tensor_parallel_size == d.tensor_parallel_size);
  BOOST_TEST(from_file.enable_expert_parallel == d.enable_expert_parallel);
  BOOST_TEST(from_file.threads == d.threads);
  BOOST_TEST(from_file.device == d.device);
  BOOST_TEST(from_file.max_model_len == d.max_model_len);
  BOOST_TEST(from_file.default_max_tokens == d.default_max_tokens);
  BOOST_TEST(from_file.quantization == d.quantization);
  BOOST_TEST(from_file.kv_cache_dtype == d.kv_cache_dtype);
  BOOST_TEST(from_file.compute_dtype == d.compute_dtype);
  BOOST_TEST(from_file.use_mmap == d.use_mmap);
  BOOST_TEST(from_file.rope_scaling == d.rope_scaling);
  BOOST_TEST(from_file.max_num_seqs == d.max_num_seqs);
  BOOST_TEST(from_file.max_num_batched_tokens == d.max_num_batched_tokens);
  BOOST_TEST(from_file.long_prefill_token_threshold == d.long_prefill_token_threshold);
  BOOST_TEST(from_file.max_prefill_tokens_while_decoding == d.max_prefill_tokens_while_decoding);
  BOOST_TEST(from_file.decode_slowdown_percent == d.decode_slowdown_percent);
  BOOST_TEST(from_file.enable_chunked_prefill == d.enable_chunked_prefill);
  BOOST_TEST(from_file.max_waiting == d.max_waiting);
  BOOST_TEST(from_file.policy == d.policy);
  BOOST_TEST(from_file.static_batching == d.static_batching);
  BOOST_TEST(from_file.num_speculative_tokens == d.num_speculative_tokens);
  BOOST_TEST(from_file.prompt_lookup_min == d.prompt_lookup_min);
  BOOST_TEST(from_file.prompt_lookup_max == d.prompt_lookup_max);
  BOOST_TEST(from_file.block_size == d.block_size);
  BOOST_TEST(from_file.kv_cache_memory_bytes == d.kv_cache_memory_bytes);
  BOOST_TEST(from_file.num_kv_blocks == d.num_kv_blocks);
  BOOST_TEST(from_file.enable_prefix_caching == d.enable_prefix_caching);
  BOOST_TEST(from_file.redis_url == d.redis_url);
  BOOST_TEST(from_file.prefix_namespace == d.prefix_namespace);
  BOOST_TEST(from_file.prefix_ttl_s == d.prefix_ttl_s);
  BOOST_TEST(from_file.prefix_fetch_budget_ms == d.prefix_fetch_budget_ms);
  BOOST_TEST(from_file.prefix_publish_budget_ms == d.prefix_publish_budget_ms);
  BOOST_TEST(from_file.prefix_lookup_strategy == d.prefix_lookup_strategy);
  BOOST_TEST(from_file.prefix_max_fetch_bytes == d.prefix_max_fetch_bytes);
  BOOST_TEST(from_file.prefix_max_pending_remote_bytes == d.prefix_max_pending_remote_bytes);
  BOOST_TEST(from_file.prefix_max_publish_queue_bytes == d.prefix_max_publish_queue_bytes);
  BOOST_TEST(from_file.redis_connect_timeout_ms == d.redis_connect_timeout_ms);
  BOOST_TEST(from_file.redis_backoff_initial_ms == d.redis_backoff_initial_ms);
  BOOST_TEST(from_file.redis_backoff_max_ms == d.redis_backoff_max_ms);
}

BOOST_AUTO_TEST_CASE(prefix_cache_keys_and_their_errors) {
  server_config c;
  BOOST_TEST(c.enable_prefix_caching);  // on by default
  apply_override(c, "prefix_cache.enabled=false");
  apply_override(c, "prefix_cache.redis_url=redis://u:secret@10.0.0.5:6380/2");
  apply_override(c, "prefix_cache.namespace=team-a");
  apply_override(c, "prefix_cache.fetch_budget_ms=50");
  apply_override(c, "prefix_cache.lookup_strategy=binary_search");
  BOOST_TEST(!c.enable_prefix_caching);
  BOOST_TEST(c.redis_url == "redis://u:secret@10.0.0.5:6380/2");
  BOOST_TEST(c.prefix_namespace == "team-a");
  BOOST_TEST(c.prefix_fetch_budget_ms == 50);
  BOOST_TEST(c.prefix_lookup_strategy == "binary_search");
  validate(c);
  expect_error([&] { apply_override(c, "prefix_cache.fetch_budget_ms=0"); },
               "prefix_cache.fetch_budget_ms = 0 is out of range");
  expect_error([&] { apply_override(c, "prefix_cache.ttl=5"); }, "unknown key 'ttl' in [prefix_cache]");
  auto bad = c;
  bad.redis_url = "http://localhost:6379";
  expect_error([&] { validate(bad); }, "prefix_cache.redis_url (--redis)");
  bad = c;
  bad.prefix_namespace = "a:b";
  expect_error([&] { validate(bad); }, "prefix_cache.namespace = 'a:b'");
  bad = c;
  bad.prefix_lookup_strategy = "linear";
  expect_error([&] { validate(bad); }, "prefix_cache.lookup_strategy = 'linear'");
  bad = c;
  bad.redis_backoff_max_ms = 10;
  expect_error([&] { validate(bad); }, "prefix_cache.backoff_max_ms (10)");
}

BOOST_AUTO_TEST_SUITE_END()
