// Every knob of `troupe serve` with its default: what config/troupe.toml documents, what
// --config FILE and --set section.key=value override. Parsing is strict: an unknown key or a
// value of the wrong type or range is an error naming the file, the key and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/shard.hpp"
#include "runtime/sched/ngram_proposer.hpp"
#include "runtime/wire/cors.hpp"

namespace troupe::serve {

struct server_config {
  // [server]
  std::string host = "127.0.0.1";
  int32_t port = 7711;             // 0 = any free port (printed in the banner)
  int32_t metrics_port = 7712;     // 0 = any free port, -1 = no metrics endpoint
  int32_t http_port = 8000;        // the OpenAI-compatible HTTP API (vLLM's port); 0 = any, -1 = off
  int64_t max_frame_bytes = 1 << 20;
  int32_t max_connections = 256;
  int32_t max_requests_per_connection = 256;
  int64_t max_connection_buffer_bytes = 8 << 20;
  int32_t shutdown_grace_ms = 10000;
  // A connection with nothing running that sends no complete request for this long is closed
  // (idle_timeout); 0 = never. Frees the slots of clients that connect and go quiet.
  int32_t idle_timeout_ms = 0;
  // The stats line (vLLM's log_stats: throughput, running/waiting, KV usage, prefix hit rate) is
  // printed this often while the server is busy; 0 = never (--disable-log-stats).
  int32_t log_stats_interval_ms = 10000;
  // vLLM's --enable-log-requests: a line per completion admitted (prompt length and sampling, never
  // the text) and per completion ended (reason, tokens, timings). Off by default.
  bool log_requests = false;
  // vLLM's --enable-request-id-headers: every HTTP answer carries X-Request-Id (the client's, or
  // the one the server made for the request).
  bool request_id_headers = false;
  // vLLM's --return-tokens-as-token-ids: every chat and completions logprob names its token
  // "token_id:ID" (as a request's return_tokens_as_token_ids does), not its text.
  bool return_tokens_as_token_ids = false;
  // vLLM's VLLM_SERVER_DEV_MODE: POST /reset_prefix_cache is served (else 404); for benchmarks
  // that measure a cold cache without restarting the server.
  bool dev_endpoints = false;
  // vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING: POST /v1/load_lora_adapter and /v1/unload_lora_adapter
  // load and unload LoRA adapters while the server runs (a path on the server's disk: keep the API
  // key set where clients are not trusted). Off: those paths are 404.
  bool allow_runtime_lora_updating = false;
  // The Responses API's store (OpenAI's `store`, vLLM's VLLM_ENABLE_RESPONSES_API_STORE): responses
  // kept in memory for previous_response_id and GET /v1/responses/{id}, the least recently used
  // dropped beyond this many bytes; 0 = none kept.
  int64_t responses_store_bytes = int64_t{64} << 20;
  // OpenAI's Conversations API (/v1/conversations, a response's `conversation`): conversations kept
  // in memory, the least recently used dropped beyond this many bytes; 0 = none kept.
  int64_t conversations_store_bytes = int64_t{64} << 20;
  // Background responses (the Responses API's `background: true`) running at once; more are 429.
  // They belong to no connection, so max_requests_per_connection does not bound them.
  int32_t max_background_responses = 256;
  int32_t tokenizer_workers = 2;
  int32_t actor_threads = 2;
  // CAF's scheduler for them: "sharing" (idle workers block) or "stealing" (idle workers poll;
  // on a machine with as many cores as engine threads they took ~25% of the engine's time).
  std::string actor_scheduling = "sharing";
  std::string admin_token;         // "" = admin requests (set_policy) are refused
  std::string api_key;             // "" = the OpenAI API's /v1 requests need no Authorization header
  // CORS for browser pages on other origins (vLLM's --allowed-origins ...): lists, comma-separated
  // or JSON arrays; "*" = any; no origins (the default, unlike vLLM's "*") = CORS off.
  // docs/openai_api.md.
  std::string allowed_origins;
  std::string allowed_methods = "*";
  std::string allowed_headers = "*";
  bool allow_credentials = false;
  // [model]
  // The names clients give as `model`, comma-separated (vLLM's --served-model-name takes several):
  // the first is the one answers carry, the others are aliases; "" = the model directory's name.
  std::string served_model_name;
  // vLLM's --chat-template: a template file, or the template itself, instead of the model's
  // (chat_template::from_directory); "" = the model's.
  std::string chat_template;
  // vLLM's --default-chat-template-kwargs: a JSON object of template variables every chat request
  // gets unless it gives its own (chat_template_kwargs); enable_thinking false makes Qwen3 answer
  // without thinking by default. "" = none.
  std::string default_chat_template_kwargs;
  // vLLM's --trust-request-chat-template: a request's own chat_template is rendered (a template
  // runs on the server: for trusted clients). Off: such a request is refused.
  bool trust_request_chat_template = false;
  // A chat's reasoning_effort (the Responses API's reasoning.effort) as a thinking_token_budget:
  // "low=1024,medium=8192,high=-1"; "" = efforts other than "none" change nothing (Qwen3 thinks or
  // does not). A request's own thinking_token_budget wins.
  std::string reasoning_effort_budgets;
  // How the model writes tool calls (vLLM's --tool-call-parser): "auto" (from the chat template:
  // qwen3_coder when it teaches Qwen3-Coder's XML calls, else hermes), "hermes" or "qwen3_coder".
  std::string tool_call_parser = "auto";
  int32_t max_model_len = 0;       // 0 = the model's context length (model_config::context_length)
  int32_t default_max_tokens = 256;
  std::string quantization = "none";  // quantize float weights on load: none, int8, fp8 (docs/quantization.md)
  std::string compute_dtype = "f32";  // matmul arithmetic for BF16 weights: f32 (exact), bf16 (docs/engine.md)
  bool use_mmap = true;               // false (--no-mmap): weights read into 2 MB pages (docs/engine.md)
  std::string rope_scaling;           // "" = config.json's; else a JSON object (or null) replacing it (docs/engine.md)
  // Default sampling (vLLM's --generation-config, --override-generation-config): "auto" (the
  // model's generation_config.json), "vllm" (none), or a directory; and a JSON object of fields over it.
  std::string generation_config = "auto";
  std::string override_generation_config;
  std::string lora_modules;           // "NAME=DIR,NAME=DIR": PEFT LoRA adapters requests name (docs/lora.md); --lora
  int32_t max_loras = 0;      // distinct adapters among the running requests (vLLM's --max-loras); 0 = no cap
  int32_t max_lora_rank = 0;  // adapters of a higher rank are refused at load (vLLM's --max-lora-rank); 0 = any
  int32_t tensor_parallel_size = 1;   // CPU shards the step is split over (docs/engine.md); --tensor-parallel-size
  bool enable_expert_parallel = false;  // MoE layers: whole experts per shard (docs/engine.md); --enable-expert-parallel
  int32_t pipeline_parallel_size = 1;  // pipeline stages of consecutive layers (docs/engine.md); --pipeline-parallel-size
  std::string pipeline_layers;  // each stage's layer count, "10,8,10"; empty: vLLM's even split; --pipeline-layers
  std::string pipeline_schedule = "auto";  // "auto", "wavefront" or "in_turn" (docs/engine.md); --pipeline-schedule
  int32_t threads = 0;  // the step's CPU threads, shared among the shards and stages; 0 = OMP_NUM_THREADS, else every core; --threads
  // Where the forward step runs: "cpu" (the CPU engine) or "cuda" (one CUDA device, the CUDA runner;
  // a troupe built with nvcc; dense models, float or FP8 weights, a float32 KV pool; docs/cuda.md); --device
  std::string device = "cpu";
  // [scheduler]
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t long_prefill_token_threshold = 0;
  int32_t max_prefill_tokens_while_decoding = 64;
  int32_t decode_slowdown_percent = 100;  // 0 = the fixed cap above
  bool enable_chunked_prefill = true;
  int32_t max_waiting = 1024;
  std::string policy = "fcfs";     // a policy plugin's name or path (docs/plugins.md)
  std::string policy_config;       // its key=value config
  std::string plugin_dirs;         // colon-separated, searched before the built-in plugin dirs
  int64_t policy_starvation_limit = 20000;  // 0 = off
  bool static_batching = false;
  // [speculative]: prompt-lookup (ngram) drafts per decode step, verified in that step
  int32_t num_speculative_tokens = 0;  // key `num_tokens`; 0 = off; --speculative-tokens
  int32_t prompt_lookup_min = sched::ngram_options{}.min_n;
  int32_t prompt_lookup_max = sched::ngram_options{}.max_n;
  // A draft model's directory instead of prompt lookup (vLLM's draft_model; docs/speculative.md);
  // key `model`, --speculative-model. Needs num_tokens > 0 and the CPU device.
  std::string speculative_model;
  // With a draft model: each sequence guesses only as many tokens as its acceptance pays for
  // (sched::worthwhile_guesses, the price of a guess from the two models' weight bytes); false:
  // always num_tokens. Key `adaptive_draft_length`.
  bool adaptive_draft_length = true;
  // vLLM's disable_by_batch_size: no drafts while at least this many requests run; 0 = never.
  int32_t speculative_disable_by_batch_size = 0;
  // [kv_cache]
  int32_t block_size = 16;
  int64_t kv_cache_memory_bytes = int64_t{1} << 30;
  int32_t num_kv_blocks = 0;       // > 0 overrides the memory budget (tests, benchmarks)
  std::string kv_cache_dtype = "auto";  // auto (float32), int8, fp8 (vLLM's spellings)
  // [prefix_cache] (docs/prefix_cache.md)
  bool enable_prefix_caching = true;           // key `enabled`; --no-prefix-cache turns it off
  std::string redis_url;                       // "" = local only; --redis
  std::string prefix_namespace = "troupe";     // key `namespace`: first part of every Redis key
  int64_t prefix_ttl_s = 3600;                 // every Redis entry expires (refreshed on a hit)
  int32_t prefix_fetch_budget_ms = 1000;       // longest a request waits for its Redis look-up
  int32_t prefix_publish_budget_ms = 2000;     // longest one publish round may take
  std::string prefix_lookup_strategy = "pipelined";  // or "binary_search"
  int64_t prefix_max_fetch_bytes = int64_t{1} << 30;            // per request
  int64_t prefix_max_pending_remote_bytes = int64_t{1} << 30;   // fetched, waiting for admission
  int64_t prefix_max_publish_queue_bytes = int64_t{256} << 20;  // waiting to be written
  int32_t redis_connect_timeout_ms = 500;
  int32_t redis_backoff_initial_ms = 100;
  int32_t redis_backoff_max_ms = 5000;
};

// How errors name model.max_lora_rank (check_lora_rank's `setting`).
inline constexpr std::string_view kMaxLoraRank = "model.max_lora_rank (--max-lora-rank)";

// Overlays the TOML text on `cfg` (only the keys present change). `origin` names the file in errors.
void apply_toml(server_config& cfg, std::string_view toml_text, const std::string& origin);
void load_file(server_config& cfg, const std::string& path);
// One "section.key=value" override (value in TOML syntax, strings may be bare).
void apply_override(server_config& cfg, std::string_view assignment);
// Checks ranges across keys, that the policy plugin can be found, and the prefix_cache section
// (redis_url, namespace, lookup_strategy); throws troupe::error(invalid_argument) naming the key.
void validate(const server_config& cfg);
// The HTTP API's CORS policy from server.allowed_origins, allowed_methods, allowed_headers and
// allow_credentials; throws troupe::error(invalid_argument) naming the key (validate checks it).
wire::cors_policy cors_policy_of(const server_config& cfg);
// How the CPU engine splits the model: model.tensor_parallel_size, enable_expert_parallel,
// threads, pipeline_parallel_size and pipeline_layers (validate has parsed them).
parallel_config parallel_of(const server_config& cfg);
// What model.compute_dtype adds to the prefix cache's identity: for f32 "" (the FMA path: the same
// bits on every CPU) or "f32-amx" (BF16 weights on the AMX tiles: their own sums), for bf16
// "bf16-vdpbf16ps" or "bf16-amx", so replicas share K/V only where they compute the same bits
// (validate has parsed the key).
std::string compute_arithmetic(const server_config& cfg);
// "a:b::c" -> {"a", "b", "c"} (scheduler.plugin_dirs).
std::vector<std::string> split_dirs(std::string_view dirs);
// model.served_model_name "a,b" -> {"a", "b"} (empty: none); throws troupe::error(invalid_argument)
// naming the key when a name is empty, has white space, or repeats.
std::vector<std::string> parse_served_model_names(std::string_view names);
// model.lora_modules "a=/x,b=/y" -> {{"a", "/x"}, {"b", "/y"}}; throws troupe::error(invalid_argument)
// naming the entry when one is not NAME=DIR, a name has white space or a comma, or repeats.
std::vector<std::pair<std::string, std::string>> parse_lora_modules(std::string_view modules);
// model.reasoning_effort_budgets "low=1024,medium=8192,high=-1" -> {{"low", 1024}, ...}; throws
// troupe::error(invalid_argument) naming the entry when one is not EFFORT=TOKENS (TOKENS >= -1),
// names "none" (which turns thinking off), or repeats.
std::vector<std::pair<std::string, int32_t>> parse_effort_budgets(std::string_view budgets);
// vLLM's --speculative-config JSON onto the [speculative] keys: "method" ("ngram" or
// "draft_model"; a "model" alone means draft_model), "model", "num_speculative_tokens",
// "prompt_lookup_min", "prompt_lookup_max". Throws troupe::error(invalid_argument) naming the key
// for an unknown key, a method Troupe does not run (eagle, mtp, ...), or a value of the wrong type.
void apply_speculative_config(server_config& cfg, std::string_view json);

}  // namespace troupe::serve
