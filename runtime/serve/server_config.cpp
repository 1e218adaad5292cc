#include "runtime/serve/server_config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fstream>
#include <optional>
#include <limits>
#include <sstream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>
#include <variant>

#include "runtime/core/error.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/plugin_host/plugin_library.hpp"
#include "runtime/prefix/block_hash.hpp"
#include "runtime/prefix/redis_url.hpp"
#include "runtime/quant/quant_config.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/serve/cuda_limits.hpp"

namespace troupe::serve {

namespace {

using int32_field = int32_t server_config::*;
using int64_field = int64_t server_config::*;
using bool_field = bool server_config::*;
using string_field = std::string server_config::*;

struct knob {
  std::string_view section, key;
  std::variant<int32_field, int64_field, bool_field, string_field> field;
  int64_t lo = 0, hi = 0;  // integers only
};

constexpr int64_t i32max = std::numeric_limits<int32_t>::max();
constexpr int64_t i64max = std::numeric_limits<int64_t>::max();

const std::vector<knob>& knobs() {
  static const std::vector<knob> k = {
      {"server", "host", &server_config::host},
      {"server", "port", &server_config::port, 0, 65535},
      {"server", "metrics_port", &server_config::metrics_port, -1, 65535},
      {"server", "http_port", &server_config::http_port, -1, 65535},
      {"server", "max_frame_bytes", &server_config::max_frame_bytes, 64, int64_t{1} << 31},
      {"server", "max_connections", &server_config::max_connections, 1, i32max},
      {"server", "max_requests_per_connection", &server_config::max_requests_per_connection, 1, i32max},
      {"server", "max_connection_buffer_bytes", &server_config::max_connection_buffer_bytes, 4096, i64max},
      {"server", "shutdown_grace_ms", &server_config::shutdown_grace_ms, 0, i32max},
      {"server", "idle_timeout_ms", &server_config::idle_timeout_ms, 0, i32max},
      {"server", "log_stats_interval_ms", &server_config::log_stats_interval_ms, 0, i32max},
      {"server", "log_requests", &server_config::log_requests},
      {"server", "request_id_headers", &server_config::request_id_headers},
      {"server", "return_tokens_as_token_ids", &server_config::return_tokens_as_token_ids},
      {"server", "dev_endpoints", &server_config::dev_endpoints},
      {"server", "allow_runtime_lora_updating", &server_config::allow_runtime_lora_updating},
      {"server", "responses_store_bytes", &server_config::responses_store_bytes, 0, i64max},
      {"server", "conversations_store_bytes", &server_config::conversations_store_bytes, 0, i64max},
      {"server", "max_background_responses", &server_config::max_background_responses, 0, i32max},
      {"server", "tokenizer_workers", &server_config::tokenizer_workers, 1, 64},
      {"server", "actor_threads", &server_config::actor_threads, 1, 256},
      {"server", "actor_scheduling", &server_config::actor_scheduling},
      {"server", "admin_token", &server_config::admin_token},
      {"server", "api_key", &server_config::api_key},
      {"server", "allowed_origins", &server_config::allowed_origins},
      {"server", "allowed_methods", &server_config::allowed_methods},
      {"server", "allowed_headers", &server_config::allowed_headers},
      {"server", "allow_credentials", &server_config::allow_credentials},
      {"model", "served_model_name", &server_config::served_model_name},
      {"model", "chat_template", &server_config::chat_template},
      {"model", "default_chat_template_kwargs", &server_config::default_chat_template_kwargs},
      {"model", "trust_request_chat_template", &server_config::trust_request_chat_template},
      {"model", "reasoning_effort_budgets", &server_config::reasoning_effort_budgets},
      {"model", "tool_call_parser", &server_config::tool_call_parser},
      {"model", "max_model_len", &server_config::max_model_len, 0, i32max},
      {"model", "default_max_tokens", &server_config::default_max_tokens, 1, i32max},
      {"model", "quantization", &server_config::quantization},
      {"model", "compute_dtype", &server_config::compute_dtype},
      {"model", "use_mmap", &server_config::use_mmap},
      {"model", "rope_scaling", &server_config::rope_scaling},
      {"model", "generation_config", &server_config::generation_config},
      {"model", "override_generation_config", &server_config::override_generation_config},
      {"model", "lora_modules", &server_config::lora_modules},
      {"model", "max_loras", &server_config::max_loras, 0, i32max},
      {"model", "max_lora_rank", &server_config::max_lora_rank, 0, i32max},
      {"model", "tensor_parallel_size", &server_config::tensor_parallel_size, 1, 256},
      {"model", "enable_expert_parallel", &server_config::enable_expert_parallel},
      {"model", "pipeline_parallel_size", &server_config::pipeline_parallel_size, 1, 256},
      {"model", "pipeline_layers", &server_config::pipeline_layers},
      {"model", "pipeline_schedule", &server_config::pipeline_schedule},
      {"model", "threads", &server_config::threads, 0, 4096},
      {"model", "device", &server_config::device},
      {"scheduler", "max_num_seqs", &server_config::max_num_seqs, 1, i32max},
      {"scheduler", "max_num_batched_tokens", &server_config::max_num_batched_tokens, 1, i32max},
      {"scheduler", "long_prefill_token_threshold", &server_config::long_prefill_token_threshold, 0, i32max},
      {"scheduler", "max_prefill_tokens_while_decoding", &server_config::max_prefill_tokens_while_decoding, 0, i32max},
      {"scheduler", "decode_slowdown_percent", &server_config::decode_slowdown_percent, 0, 100000},
      {"scheduler", "enable_chunked_prefill", &server_config::enable_chunked_prefill},
      {"scheduler", "max_waiting", &server_config::max_waiting, 1, i32max},
      {"scheduler", "policy", &server_config::policy},
      {"scheduler", "policy_config", &server_config::policy_config},
      {"scheduler", "plugin_dirs", &server_config::plugin_dirs},
      {"scheduler", "policy_starvation_limit", &server_config::policy_starvation_limit, 0, i64max},
      {"scheduler", "static_batching", &server_config::static_batching},
      {"speculative", "num_tokens", &server_config::num_speculative_tokens, 0, 64},
      {"speculative", "prompt_lookup_min", &server_config::prompt_lookup_min, 1, 64},
      {"speculative", "prompt_lookup_max", &server_config::prompt_lookup_max, 1, 64},
      {"speculative", "model", &server_config::speculative_model},
      {"speculative", "adaptive_draft_length", &server_config::adaptive_draft_length},
      {"speculative", "disable_by_batch_size", &server_config::speculative_disable_by_batch_size, 0, i32max},
      {"kv_cache", "block_size", &server_config::block_size, 1, 1024},
      {"kv_cache", "kv_cache_memory_bytes", &server_config::kv_cache_memory_bytes, 1, i64max},
      {"kv_cache", "num_kv_blocks", &server_config::num_kv_blocks, 0, i32max},
      {"kv_cache", "kv_cache_dtype", &server_config::kv_cache_dtype},
      {"prefix_cache", "enabled", &server_config::enable_prefix_caching},
      {"prefix_cache", "redis_url", &server_config::redis_url},
      {"prefix_cache", "namespace", &server_config::prefix_namespace},
      {"prefix_cache", "ttl_s", &server_config::prefix_ttl_s, 1, int64_t{1} << 31},
      {"prefix_cache", "fetch_budget_ms", &server_config::prefix_fetch_budget_ms, 1, 600000},
      {"prefix_cache", "publish_budget_ms", &server_config::prefix_publish_budget_ms, 1, 600000},
      {"prefix_cache", "lookup_strategy", &server_config::prefix_lookup_strategy},
      {"prefix_cache", "max_fetch_bytes", &server_config::prefix_max_fetch_bytes, 1, i64max},
      {"prefix_cache", "max_pending_remote_bytes", &server_config::prefix_max_pending_remote_bytes, 1, i64max},
      {"prefix_cache", "max_publish_queue_bytes", &server_config::prefix_max_publish_queue_bytes, 0, i64max},
      {"prefix_cache", "connect_timeout_ms", &server_config::redis_connect_timeout_ms, 1, 600000},
      {"prefix_cache", "backoff_initial_ms", &server_config::redis_backoff_initial_ms, 1, 600000},
      {"prefix_cache", "backoff_max_ms", &server_config::redis_backoff_max_ms, 1, 3600000},
  };
  return k;
}

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw_error(errc::invalid_argument, origin + ": " + what);
}

const knob& find_knob(std::string_view section, std::string_view key, const std::string& origin) {
  bool section_known = false;
  for (const auto& k : knobs()) {
    section_known = section_known || k.section == section;
    if (k.section == section && k.key == key) return k;
  }
  if (!section_known)
    bad(origin, "unknown section [" + std::string(section) + "]; expected server, model, scheduler, kv_cache or prefix_cache");
  bad(origin, "unknown key '" + std::string(key) + "' in [" + std::string(section) + "]");
}

void set(server_config& cfg, const knob& k, const toml::node& v, const std::string& origin) {
  std::string name = std::string(k.section) + "." + std::string(k.key);
  std::visit(
      [&](auto field) {
        using F = decltype(field);
        if constexpr (std::is_same_v<F, bool_field>) {
          if (!v.is_boolean()) bad(origin, name + " must be true or false");
          cfg.*field = v.as_boolean()->get();
        } else if constexpr (std::is_same_v<F, string_field>) {
          if (!v.is_string()) bad(origin, name + " must be a string");
          cfg.*field = v.as_string()->get();
        } else {
          if (!v.is_integer()) bad(origin, name + " must be an integer");
          int64_t x = v.as_integer()->get();
          if (x < k.lo || x > k.hi)
            bad(origin, name + " = " + std::to_string(x) + " is out of range; expected " + std::to_string(k.lo) +
                            ".." + std::to_string(k.hi));
          cfg.*field = static_cast<std::remove_reference_t<decltype(cfg.*field)>>(x);
        }
      },
      k.field);
}

toml::table parse(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << "line " << e.source().begin.line << ": " << e.description();
    bad(origin, m.str());
  }
}

}  // namespace

void apply_toml(server_config& cfg, std::string_view text, const std::string& origin) {
  auto root = parse(text, origin);
  for (const auto& [section, node] : root) {
    if (!node.is_table()) bad(origin, "top-level key '" + std::string(section.str()) + "' must be a [section]");
    for (const auto& [key, value] : *node.as_table())
      set(cfg, find_knob(section.str(), key.str(), origin), value, origin);
  }
}

void load_file(server_config& cfg, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error(errc::io_error, "cannot read config file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  apply_toml(cfg, ss.str(), path);
}

void apply_override(server_config& cfg, std::string_view a) {
  std::string origin = "--set " + std::string(a);
  auto eq = a.find('=');
  auto dot = a.find('.');
  if (eq == std::string_view::npos || dot == std::string_view::npos || dot > eq)
    bad(origin, "expected section.key=value (e.g. scheduler.max_num_seqs=32)");
  auto section = a.substr(0, dot);
  auto key = a.substr(dot + 1, eq - dot - 1);
  auto value = std::string(a.substr(eq + 1));
  const auto& k = find_knob(section, key, origin);
  // Strings may be given bare: --set server.host=0.0.0.0
  if (std::holds_alternative<string_field>(k.field) && (value.empty() || value.front() != '"')) {
    cfg.*std::get<string_field>(k.field) = value;
    return;
  }
  auto doc = parse("x = " + value, origin);
  set(cfg, k, *doc.get("x"), origin);
}

std::vector<std::string> split_dirs(std::string_view dirs) {
  std::vector<std::string> out;
  while (!dirs.empty()) {
    auto colon = dirs.find(':');
    if (colon != 0) out.emplace_back(dirs.substr(0, colon));
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return out;
}

std::vector<std::string> parse_served_model_names(std::string_view names) {
  std::vector<std::string> out;
  if (names.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = names.find(',', start);
    std::string name(names.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (name.empty() || name.size() > 256 || name.find_first_of(" \t\r\n") != std::string::npos)
      throw_error(errc::invalid_argument, "model.served_model_name (--served-model-name): '" + name +
                                              "' is not a name (1 to 256 bytes without white space; several are "
                                              "separated by commas)");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw_error(errc::invalid_argument, "model.served_model_name (--served-model-name): '" + name + "' is given twice");
    out.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {
// The non-empty entries of a comma-separated list ("a=1,,b=2" -> "a=1", "b=2").
std::vector<std::string_view> comma_entries(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (comma != 0) out.push_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> parse_lora_modules(std::string_view modules) {
  std::vector<std::pair<std::string, std::string>> out;
  auto fail = [](const std::string& why) { throw_error(errc::invalid_argument, "model.lora_modules (--lora): " + why); };
  for (const std::string_view entry : comma_entries(modules)) {
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == entry.size())
      fail("'" + std::string(entry) + "' is not NAME=DIR");
    std::string name(entry.substr(0, eq));
    if (name.size() > 128 || name.find_first_of(" \t\r\n") != std::string::npos)
      fail("adapter name '" + name + "' must be at most 128 bytes without white space");
    for (const auto& [n, d] : out)
      if (n == name) fail("adapter name '" + name + "' is given twice");
    out.emplace_back(std::move(name), std::string(entry.substr(eq + 1)));
  }
  return out;
}

std::vector<std::pair<std::string, int32_t>> parse_effort_budgets(std::string_view budgets) {
  std::vector<std::pair<std::string, int32_t>> out;
  auto fail = [](const std::string& why) {
    throw_error(errc::invalid_argument, "model.reasoning_effort_budgets (--reasoning-effort-budgets): " + why);
  };
  for (const std::string_view entry : comma_entries(budgets)) {
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) fail("'" + std::string(entry) + "' is not EFFORT=TOKENS");
    std::string name(entry.substr(0, eq));
    if (name == "none") fail("'none' turns thinking off; it takes no budget");
    for (const auto& [n, b] : out)
      if (n == name) fail("effort '" + name + "' is given twice");
    const std::string_view num = entry.substr(eq + 1);
    int64_t tokens = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), tokens);
    if (ec != std::errc() || p != num.data() + num.size() || num.empty() || tokens < -1 || tokens > INT32_MAX)
      fail("'" + std::string(entry) + "': TOKENS must be a count >= 0, or -1 for no budget");
    out.emplace_back(std::move(name), static_cast<int32_t>(tokens));
  }
  return out;
}

parallel_config parallel_of(const server_config& c) {
  parallel_config p{c.tensor_parallel_size, c.enable_expert_parallel, c.threads};
  p.pipeline_size = c.pipeline_parallel_size;
  p.pipeline_layers = parse_pipeline_layers(c.pipeline_layers, "model.pipeline_layers (--pipeline-layers)");
  p.schedule = parse_pipeline_schedule(c.pipeline_schedule, "model.pipeline_schedule (--pipeline-schedule)");
  return p;
}

std::string compute_arithmetic(const server_config& c) {
  if (parse_compute_dtype(c.compute_dtype, "model.compute_dtype (--compute-dtype)") == kernels::compute_dtype::f32)
    return std::string(kernels::f32_arithmetic()) == "amx" ? "f32-amx" : "";
  return std::string("bf16-") + kernels::bf16_arithmetic();
}

wire::cors_policy cors_policy_of(const server_config& c) {
  wire::cors_policy p;
  p.origins = wire::parse_cors_list(c.allowed_origins, "server.allowed_origins (--allowed-origins)");
  p.methods = wire::parse_cors_list(c.allowed_methods, "server.allowed_methods (--allowed-methods)");
  p.headers = wire::parse_cors_list(c.allowed_headers, "server.allowed_headers (--allowed-headers)");
  p.allow_credentials = c.allow_credentials;
  return p;
}

void apply_speculative_config(server_config& cfg, std::string_view json) {
  const std::string who = "--speculative-config";
  auto bad = [&](const std::string& m) { throw_error(errc::invalid_argument, who + ": " + m); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) bad("expected a JSON object such as '{\"model\": \"DIR\", \"num_speculative_tokens\": 4}'");
  // An integer key within [lo, hi]; `expected` says so in the refusal.
  auto integer = [&](const char* key, int64_t lo, int64_t hi, const std::string& expected) -> std::optional<int32_t> {
    if (!j.contains(key)) return std::nullopt;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) bad(std::string(key) + " must be " + expected);
    return v.get<int32_t>();
  };
  auto count = [&](const char* key, int32_t lo) {
    return integer(key, lo, 64, "an integer from " + std::to_string(lo) + " to 64");
  };
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "model" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "disable_by_batch_size")
      bad("unknown key '" + key +
          "'; Troupe reads method, model, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max and "
          "disable_by_batch_size");
  std::string model;
  if (j.contains("model")) {
    if (!j["model"].is_string() || j["model"].get<std::string>().empty()) bad("model must be a directory name");
    model = j["model"].get<std::string>();
  }
  std::string method = model.empty() ? "ngram" : "draft_model";
  if (j.contains("method")) {
    if (!j["method"].is_string()) bad("method must be a string");
    method = j["method"].get<std::string>();
  }
  if (method == "ngram") {
    if (!model.empty()) bad("method 'ngram' (prompt lookup) takes no model");
  } else if (method == "draft_model") {
    if (model.empty()) bad("method 'draft_model' needs \"model\": the draft model's directory");
  } else {
    bad("method '" + method + "' is not one Troupe runs; it runs 'ngram' (prompt lookup) and 'draft_model'");
  }
  const auto n = count("num_speculative_tokens", 1);
  if (!n) bad("num_speculative_tokens is required: the tokens guessed per step");
  cfg.num_speculative_tokens = *n;
  cfg.speculative_model = model;
  if (auto v = count("prompt_lookup_min", 1)) cfg.prompt_lookup_min = *v;
  if (auto v = count("prompt_lookup_max", 1)) cfg.prompt_lookup_max = *v;
  if (auto v = integer("disable_by_batch_size", 0, std::numeric_limits<int32_t>::max(), "an integer >= 0 (0: never)"))
    cfg.speculative_disable_by_batch_size = *v;
}

void validate(const server_config& c) {
  auto bad2 = [](const std::string& m) { throw_error(errc::invalid_argument, "config: " + m); };
  try {
    cors_policy_of(c);
  } catch (const error& e) {
    bad2(e.what());
  }
  try {
    parse_lora_modules(c.lora_modules);
    parse_served_model_names(c.served_model_name);
    parse_effort_budgets(c.reasoning_effort_budgets);
  } catch (const error& e) {
    bad2(e.what());
  }
  // The plugin must exist now (fcfs has a built-in stand-in); its config is checked at load.
  if (c.policy != "fcfs") {
    try {
      plugin_host::resolve_plugin(c.policy, split_dirs(c.plugin_dirs));
    } catch (const error& e) {
      bad2("scheduler.policy = '" + c.policy + "': " + e.what());
    }
  }
  if (c.max_model_len != 0 && c.max_model_len < 2) bad2("model.max_model_len must be 0 (model default) or >= 2");
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    bad2("speculative.prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
         ") must be <= speculative.prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
  if (!c.speculative_model.empty() && c.num_speculative_tokens == 0)
    bad2("speculative.model (--speculative-model) needs speculative.num_tokens (--speculative-tokens) > 0: the "
         "number of tokens the draft model guesses per step");
  if (!c.speculative_model.empty() && c.device != "cpu")
    bad2("speculative.model (--speculative-model): a draft model runs on the CPU device only (model.device = '" +
         c.device + "')");
  if (c.host.empty()) bad2("server.host must not be empty");
  if (c.actor_scheduling != "sharing" && c.actor_scheduling != "stealing")
    bad2("server.actor_scheduling = '" + c.actor_scheduling + "'; expected sharing or stealing");
  try {
    quant::parse_method(c.quantization, "model.quantization (--quantization)");
    parse_kv_cache_dtype(c.kv_cache_dtype);
    parse_compute_dtype(c.compute_dtype, "model.compute_dtype (--compute-dtype)");
    parallel_of(c);  // pipeline_layers and pipeline_schedule parse
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument) throw;
    bad2(e.what());
  }
  if (c.tool_call_parser != "auto" && c.tool_call_parser != "hermes" && c.tool_call_parser != "qwen3_coder")
    bad2("model.tool_call_parser = '" + c.tool_call_parser + "'; expected auto, hermes or qwen3_coder");
  if (c.device != "cpu" && c.device != "cuda") bad2("model.device = '" + c.device + "'; expected cpu or cuda");
  // What the CUDA runner does not do (cuda_limits.hpp), named by its key.
  if (c.device == "cuda") {
    const auto refused = first_cpu_only({c.tensor_parallel_size, parse_kv_cache_dtype(c.kv_cache_dtype),
                                         parse_compute_dtype(c.compute_dtype),
                                         !c.lora_modules.empty() || c.allow_runtime_lora_updating,
                                         quant::parse_method(c.quantization, "model.quantization"),
                                         c.pipeline_parallel_size});
    if (refused) {
      std::string key;
      switch (refused->setting) {
        case cpu_only::tensor_parallel_size: key = "model.tensor_parallel_size = " + std::to_string(c.tensor_parallel_size); break;
        case cpu_only::kv_cache_dtype: key = "kv_cache.kv_cache_dtype = '" + c.kv_cache_dtype + "'"; break;
        case cpu_only::compute_dtype: key = "model.compute_dtype = '" + c.compute_dtype + "'"; break;
        case cpu_only::lora:
          key = c.lora_modules.empty() ? "server.allow_runtime_lora_updating" : "model.lora_modules";
          break;
        case cpu_only::quantization: key = "model.quantization = '" + c.quantization + "'"; break;
        case cpu_only::pipeline_parallel_size:
          key = "model.pipeline_parallel_size = " + std::to_string(c.pipeline_parallel_size);
          break;
      }
      bad2(key + " (" + refused->why + "): with model.device = 'cuda' (--device cuda) this runs on the CPU only");
    }
  }
  if (!c.redis_url.empty()) {
    try {
      prefix::parse_redis_url(c.redis_url);
    } catch (const error& e) {
      bad2(std::string("prefix_cache.redis_url (--redis): ") + e.what());
    }
  }
  // The namespace is the first part of every key: store_key's rules (non-empty, no ':' or space).
  try {
    prefix::cache_identity probe;
    probe.model_fingerprint = "x";
    prefix::store_key(c.prefix_namespace, probe, prefix::block_hash{});
  } catch (const error&) {
    bad2("prefix_cache.namespace = '" + c.prefix_namespace +
         "' must be non-empty, without ':' or white space (it starts every Redis key)");
  }
  if (c.prefix_lookup_strategy != "pipelined" && c.prefix_lookup_strategy != "binary_search")
    bad2("prefix_cache.lookup_strategy = '" + c.prefix_lookup_strategy + "'; expected pipelined or binary_search");
  if (c.redis_backoff_max_ms < c.redis_backoff_initial_ms)
    bad2("prefix_cache.backoff_max_ms (" + std::to_string(c.redis_backoff_max_ms) +
         ") must be >= prefix_cache.backoff_initial_ms (" + std::to_string(c.redis_backoff_initial_ms) + ")");
}

}  // namespace troupe::serve
