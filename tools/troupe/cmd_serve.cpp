// `troupe serve`: the server. Every knob lives in the config file (config/troupe.toml documents
// them); the common ones have flags and any can be set with --set section.key=value. Without
// --model it serves a demo model with random weights, made once in ./demo-model.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <pthread.h>

#include "actors/server.hpp"
#include "runtime/core/error.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "tools/troupe/command.hpp"
#ifdef TROUPE_HAVE_CUDA_SERVE
#include "runtime/serve/cuda/cuda_step_backend.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using namespace troupe;

std::string demo_model_dir() {
  const char* env = std::getenv("TROUPE_DEMO_DIR");
  std::string dir = env && *env ? env : "demo-model";
  if (!fs::exists(fs::path(dir) / "config.json")) {
    std::printf("troupe serve: no --model given: making the demo model in %s (random weights, the real Qwen3 "
                "tokenizer; preset 'tiny')...\n", dir.c_str());
    std::fflush(stdout);
    random_checkpoint_options o;
    write_random_checkpoint(dir, preset_config("tiny"), qwen3_generation_defaults(), o);
  }
  return dir;
}

int run_serve(int argc, char** argv) {
  CLI::App app{"Serve a model to many clients over TCP (msgpack protocol, docs/protocol.md)", "troupe serve"};
  actors::server_options opts;
  auto& c = opts.cfg;
  std::string config_file;
  std::vector<std::string> sets;
  std::optional<std::string> host, api_key, policy, policy_config, redis, quantization, kv_cache_dtype, compute_dtype,
      rope_scaling, generation_config, override_generation_config, device, allowed_origins, allowed_methods, allowed_headers, chat_template,
      default_chat_template_kwargs, reasoning_effort_budgets,
      tool_call_parser, speculative_model, speculative_config, pipeline_layers, pipeline_schedule;
  std::optional<int32_t> port, metrics_port, http_port, max_model_len, max_num_seqs, max_num_batched_tokens, num_kv_blocks,
      speculative_tokens, tensor_parallel_size, threads, max_loras, max_lora_rank, pipeline_parallel_size;
  std::optional<int64_t> kv_bytes;
  bool static_batching = false, no_prefix_cache = false, no_mmap = false, expert_parallel = false, allow_credentials = false;
  bool disable_log_stats = false, enable_log_requests = false, runtime_lora = false, request_id_headers = false;
  bool tokens_as_ids = false, trust_request_template = false;
  app.add_option("--model", opts.model_dir, "Hugging Face Qwen3 checkpoint directory (default: a demo model)");
  app.add_option("--tokenizer", opts.tokenizer_dir, "directory with tokenizer.json (default: the model's)");
  std::vector<std::string> served_model_names;
  app.add_option("--served-model-name", served_model_names,
                 "the name clients give as `model` and /v1/models lists; several: the first answers, the others are "
                 "aliases (model.served_model_name, comma-separated; default: the model directory's name)");
  app.add_option("--chat-template", chat_template,
                 "a chat template file, or the template itself, instead of the model's (model.chat_template; "
                 "vLLM's flag)");
  app.add_option("--default-chat-template-kwargs", default_chat_template_kwargs,
                 "template variables every chat request gets unless it gives its own, a JSON object, e.g. "
                 "'{\"enable_thinking\": false}' (model.default_chat_template_kwargs; vLLM's flag)");
  app.add_option("--reasoning-effort-budgets", reasoning_effort_budgets,
                 "reasoning_effort as a thinking budget, e.g. low=1024,medium=8192,high=-1 "
                 "(model.reasoning_effort_budgets)");
  app.add_flag("--trust-request-chat-template", trust_request_template,
               "render a chat request's own chat_template (model.trust_request_chat_template; vLLM's flag)");
  app.add_option("--tool-call-parser", tool_call_parser,
                 "how the model writes tool calls: auto (from the chat template), hermes (Qwen3) or qwen3_coder "
                 "(Qwen3-Coder's XML) (model.tool_call_parser; vLLM's flag)");
  app.add_option("--config", config_file, "TOML config file (see config/troupe.toml)");
  app.add_option("--host", host, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", port, "client protocol port (0 = any free port)");
  app.add_option("--metrics-port", metrics_port, "Prometheus /metrics port (0 = any, -1 = off)");
  app.add_option("--http-port", http_port, "OpenAI-compatible HTTP API port (default 8000; 0 = any, -1 = off)");
  app.add_option("--api-key", api_key,
                 "key the OpenAI API's /v1 requests must carry as 'Authorization: Bearer KEY' (server.api_key; "
                 "also from the environment variable TROUPE_API_KEY)");
  app.add_option("--allowed-origins", allowed_origins,
                 "CORS: origins whose browser pages may call the HTTP API, as vLLM's flag (a JSON list or "
                 "comma-separated; '*': any; default none: CORS off)");
  app.add_option("--allowed-methods", allowed_methods, "CORS: methods allowed from those origins (default '*')");
  app.add_option("--allowed-headers", allowed_headers, "CORS: request headers allowed from those origins (default '*')");
  app.add_flag("--allow-credentials", allow_credentials, "CORS: let those origins send cookies and Authorization");
  app.add_option("--max-model-len", max_model_len, "prompt + output tokens per request");
  app.add_option("--max-num-seqs", max_num_seqs, "sequences per step");
  app.add_option("--max-num-batched-tokens", max_num_batched_tokens, "tokens per step");
  app.add_option("--kv-cache-memory-bytes", kv_bytes, "memory for the paged KV pool");
  app.add_option("--num-kv-blocks", num_kv_blocks, "exact KV pool size in blocks (overrides the memory budget)");
  app.add_option("--tensor-parallel-size", tensor_parallel_size,
                 "split each step over this many CPU shards (model.tensor_parallel_size; docs/engine.md)");
  app.add_flag("--enable-expert-parallel", expert_parallel,
               "with --tensor-parallel-size: whole experts per shard in MoE layers (model.enable_expert_parallel)");
  app.add_option("--pipeline-parallel-size,--pp", pipeline_parallel_size,
                 "split the layers over this many pipeline stages (model.pipeline_parallel_size; docs/engine.md)");
  app.add_option("--pipeline-layers", pipeline_layers,
                 "each pipeline stage's layer count, e.g. 10,8,10 (model.pipeline_layers; default as even as vLLM's)");
  app.add_option("--pipeline-schedule", pipeline_schedule,
                 "how the stages share a step: auto, wavefront or in_turn (model.pipeline_schedule; docs/engine.md)");
  app.add_option("--threads", threads,
                 "CPU threads for the forward step, shared among the shards and stages (model.threads; 0 = every core)");
  app.add_flag("--static-batching", static_batching, "baseline mode: no continuous batching");
  app.add_flag("--disable-log-stats", disable_log_stats,
               "no periodic stats line on stderr (server.log_stats_interval_ms = 0; vLLM's flag)");
  app.add_flag("--allow-runtime-lora-updating", runtime_lora,
               "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (server.allow_runtime_lora_updating; "
               "vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING)");
  app.add_flag("--enable-request-id-headers", request_id_headers,
               "every OpenAI-API answer carries X-Request-Id (server.request_id_headers)");
  app.add_flag("--return-tokens-as-token-ids", tokens_as_ids,
               "logprobs name tokens \"token_id:ID\", not their text (server.return_tokens_as_token_ids)");
  app.add_flag("--enable-log-requests", enable_log_requests,
               "a stderr line per request admitted and ended (server.log_requests; vLLM's flag)");
  app.add_option("--policy", policy,
                 "scheduling policy: fcfs, priority, fair-share, shortest-first, cache-aware, or a plugin .so path");
  app.add_option("--policy-config", policy_config, "the policy's key=value config, e.g. weight.alice=3,weight.bob=1");
  app.add_flag("--no-mmap", no_mmap, "read the weights into 2 MB pages instead of mapping the files (model.use_mmap = false)");
  app.add_flag("--no-prefix-cache", no_prefix_cache,
               "do not reuse the K/V of shared prompt prefixes (prefix_cache.enabled = false)");
  app.add_option("--redis", redis,
                 "share the prefix cache between replicas: redis://[user:password@]host:port/db or "
                 "unix:///path.sock[?db=N] (prefix_cache.redis_url)");
  app.add_option("--quantization", quantization,
                 "quantize float weights on load: none, int8, fp8 (model.quantization; pre-quantized checkpoints, "
                 "FP8, GPTQ and AWQ among them, load as they are)");
  app.add_option("--kv-cache-dtype", kv_cache_dtype, "KV cache element type: auto (float32), int8, fp8 (kv_cache.kv_cache_dtype)");
  app.add_option("--device", device,
                 "where the forward step runs: cpu or cuda (model.device; cuda needs a build with nvcc; docs/cuda.md)");
  app.add_option("--compute-dtype", compute_dtype,
                 "matmul arithmetic for BF16 weights: f32 (exact) or bf16 (model.compute_dtype; docs/engine.md)");
  app.add_option("--rope-scaling", rope_scaling,
                 "replace config.json's rope_scaling (model.rope_scaling), e.g. '{\"rope_type\":\"yarn\","
                 "\"factor\":4.0,\"original_max_position_embeddings\":32768}' for Qwen3 at 131072 tokens");
  app.add_option("--generation-config", generation_config,
                 "default sampling from: auto (the model's generation_config.json), vllm (none: temperature 1), or a "
                 "directory holding one (model.generation_config)");
  app.add_option("--override-generation-config", override_generation_config,
                 "generation_config.json fields over the default sampling's, e.g. '{\"temperature\": 0.5, "
                 "\"max_new_tokens\": 1024}' (model.override_generation_config)");
  app.add_option("--speculative-tokens", speculative_tokens,
                 "prompt-lookup drafts per decode step, verified in the step (speculative.num_tokens; 0 = off)");
  app.add_option("--speculative-model", speculative_model,
                 "a draft model's directory (a smaller Qwen3 of the same vocabulary): it guesses --speculative-tokens "
                 "tokens a step, the model verifies them (speculative.model; docs/speculative.md)");
  app.add_option("--speculative-config", speculative_config,
                 "vLLM's JSON form: '{\"model\": DIR, \"num_speculative_tokens\": 4}' or '{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}'");
  std::vector<std::string> loras;
  app.add_option("--lora", loras,
                 "serve a PEFT LoRA adapter as NAME=DIR (repeatable; requests pick it with `adapter`; "
                 "model.lora_modules; docs/lora.md)");
  app.add_option("--max-loras", max_loras,
                 "at most this many LoRA adapters among the running requests (model.max_loras; 0 = no cap; vLLM's flag)");
  app.add_option("--max-lora-rank", max_lora_rank,
                 "refuse LoRA adapters of a higher rank (model.max_lora_rank; 0 = any; vLLM's flag)");
  app.add_option("--set", sets, "override any config key: section.key=value (repeatable)");
  // vLLM's flags that a vLLM launch command for Qwen3 carries, accepted so that it runs unchanged:
  // what they turn on is always on here (tool calls are parsed, Qwen3's thinking is split into
  // reasoning_content, long prompts are chunked, and no model code is ever run).
  bool auto_tool_choice = false, chunked_prefill = false, trust_remote_code = false, prefix_caching = false;
  std::optional<std::string> reasoning_parser;
  app.add_flag("--enable-auto-tool-choice", auto_tool_choice, "vLLM's; accepted: tool calls are always parsed here");
  app.add_option("--reasoning-parser", reasoning_parser,
                 "vLLM's; accepted as qwen3 or deepseek_r1: Qwen3's <think> is always split into reasoning_content");
  app.add_flag("--enable-chunked-prefill", chunked_prefill, "vLLM's; accepted: long prompts are always chunked here");
  app.add_flag("--enable-prefix-caching", prefix_caching, "prefix_cache.enabled = true (vLLM's flag; the default)");
  app.add_flag("--trust-remote-code", trust_remote_code, "vLLM's; accepted: Troupe never runs a checkpoint's code");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Precedence: defaults < --config < --set < named flags.
  if (!config_file.empty()) serve::load_file(c, config_file);
  for (const auto& s : sets) serve::apply_override(c, s);
  if (host) c.host = *host;
  if (const char* env = std::getenv("TROUPE_API_KEY"); env && !api_key) c.api_key = env;
  if (api_key) c.api_key = *api_key;
  if (allowed_origins) c.allowed_origins = *allowed_origins;
  if (allowed_methods) c.allowed_methods = *allowed_methods;
  if (allowed_headers) c.allowed_headers = *allowed_headers;
  if (allow_credentials) c.allow_credentials = true;
  if (port) serve::apply_override(c, "server.port=" + std::to_string(*port));
  if (metrics_port) serve::apply_override(c, "server.metrics_port=" + std::to_string(*metrics_port));
  if (http_port) serve::apply_override(c, "server.http_port=" + std::to_string(*http_port));
  if (max_model_len) serve::apply_override(c, "model.max_model_len=" + std::to_string(*max_model_len));
  if (max_num_seqs) serve::apply_override(c, "scheduler.max_num_seqs=" + std::to_string(*max_num_seqs));
  if (max_num_batched_tokens)
    serve::apply_override(c, "scheduler.max_num_batched_tokens=" + std::to_string(*max_num_batched_tokens));
  if (kv_bytes) serve::apply_override(c, "kv_cache.kv_cache_memory_bytes=" + std::to_string(*kv_bytes));
  if (num_kv_blocks) serve::apply_override(c, "kv_cache.num_kv_blocks=" + std::to_string(*num_kv_blocks));
  if (tensor_parallel_size)
    serve::apply_override(c, "model.tensor_parallel_size=" + std::to_string(*tensor_parallel_size));
  if (threads) serve::apply_override(c, "model.threads=" + std::to_string(*threads));
  if (pipeline_parallel_size)
    serve::apply_override(c, "model.pipeline_parallel_size=" + std::to_string(*pipeline_parallel_size));
  if (pipeline_layers) c.pipeline_layers = *pipeline_layers;
  if (pipeline_schedule) c.pipeline_schedule = *pipeline_schedule;
  if (max_loras) serve::apply_override(c, "model.max_loras=" + std::to_string(*max_loras));
  if (max_lora_rank) serve::apply_override(c, "model.max_lora_rank=" + std::to_string(*max_lora_rank));
  if (speculative_config) {
    if (speculative_tokens || speculative_model)
      throw_error(errc::invalid_argument,
                  "--speculative-config and --speculative-tokens / --speculative-model: give the JSON or the flags");
    serve::apply_speculative_config(c, *speculative_config);
  }
  if (speculative_tokens)
    serve::apply_override(c, "speculative.num_tokens=" + std::to_string(*speculative_tokens));
  if (speculative_model) c.speculative_model = *speculative_model;
  if (static_batching) c.static_batching = true;
  if (disable_log_stats) c.log_stats_interval_ms = 0;
  if (enable_log_requests) c.log_requests = true;
  if (request_id_headers) c.request_id_headers = true;
  if (tokens_as_ids) c.return_tokens_as_token_ids = true;
  if (runtime_lora) c.allow_runtime_lora_updating = true;
  if (expert_parallel) c.enable_expert_parallel = true;
  if (policy) c.policy = *policy;
  if (policy_config) c.policy_config = *policy_config;
  if (no_prefix_cache && prefix_caching)
    throw_error(errc::invalid_argument, "--enable-prefix-caching and --no-prefix-cache: give one of them");
  if (no_prefix_cache) c.enable_prefix_caching = false;
  if (prefix_caching) c.enable_prefix_caching = true;
  if (reasoning_parser && *reasoning_parser != "qwen3" && *reasoning_parser != "deepseek_r1")
    throw_error(errc::invalid_argument, "--reasoning-parser " + *reasoning_parser +
                                            ": Troupe reads Qwen3's <think> blocks (qwen3, or deepseek_r1, the same "
                                            "format); no other format is served");
  if (no_mmap) c.use_mmap = false;
  if (redis) c.redis_url = *redis;
  if (quantization) c.quantization = *quantization;
  if (kv_cache_dtype) c.kv_cache_dtype = *kv_cache_dtype;
  if (compute_dtype) c.compute_dtype = *compute_dtype;
  if (device) c.device = *device;
  if (rope_scaling) c.rope_scaling = *rope_scaling;
  if (generation_config) c.generation_config = *generation_config;
  if (override_generation_config) c.override_generation_config = *override_generation_config;
  if (!served_model_names.empty()) {
    c.served_model_name.clear();
    for (const auto& n : served_model_names) c.served_model_name += (c.served_model_name.empty() ? "" : ",") + n;
  }
  if (chat_template) c.chat_template = *chat_template;
  if (default_chat_template_kwargs) c.default_chat_template_kwargs = *default_chat_template_kwargs;
  if (trust_request_template) c.trust_request_chat_template = true;
  if (reasoning_effort_budgets) c.reasoning_effort_budgets = *reasoning_effort_budgets;
  if (tool_call_parser) c.tool_call_parser = *tool_call_parser;
  for (const auto& l : loras) {
    if (!c.lora_modules.empty()) c.lora_modules += ',';
    c.lora_modules += l;
  }
#ifdef TROUPE_HAVE_CUDA_SERVE
  opts.cuda_backend = [](std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks, int32_t block_size) {
    return serve::make_cuda_backend(*ckpt, num_blocks, block_size);
  };
#endif
  bool demo = opts.model_dir.empty();
  if (demo) opts.model_dir = demo_model_dir();

  // Every thread the server starts inherits this mask; the main thread takes the signals.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  actors::server srv(opts);
  if (demo)
    std::printf("troupe serve: DEMO MODEL in %s: random weights, so the text is gibberish; pass --model DIR "
                "to serve a real Qwen3 checkpoint\n", opts.model_dir.c_str());
  std::printf("%s", srv.banner().c_str());
  std::printf("troupe serve: ready (Ctrl-C stops: running requests get %d ms to finish)\n", c.shutdown_grace_ms);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  std::printf("troupe serve: %s: no new requests; finishing running ones (up to %d ms)\n",
              sig == SIGINT ? "SIGINT" : "SIGTERM", c.shutdown_grace_ms);
  std::fflush(stdout);
  srv.shutdown(std::chrono::milliseconds(c.shutdown_grace_ms));
  std::printf("troupe serve: stopped\n");
  return 0;
}

}  // namespace

TROUPE_COMMAND("serve", "serve a model to many clients over TCP", run_serve);
