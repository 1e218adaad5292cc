#include "actors/server.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string_view>

#include "actors/gateway.hpp"
#include "actors/stats_logger.hpp"
#include "actors/messages.hpp"
#include "actors/supervisor.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/draft_sequence.hpp"
#include "runtime/engine/omp_threads.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/serve/chat_renderer.hpp"
#include "runtime/tokenizer/chat_template.hpp"

namespace troupe::actors {

namespace fs = std::filesystem;

struct server::impl {
  std::shared_ptr<server_context> ctx;
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor supervisor, gateway, metrics_http, stats_logger;
  uint16_t port = 0, metrics_port = 0, http_port = 0;
  bool max_len_clamped = false;
  bool stopped = false;
};

namespace {

void set_prefix_caching(server_context& ctx);

// The executor's step backend for model.device: the CPU engine (its tensor-parallel group, its KV
// dtype, the LoRA adapters) or the CUDA runner the binary provides (server_options::cuda_backend);
// with speculative.model, the draft model's CPU engine beside it over as many blocks.
executor_source::factory executor_factory(const server_options& o, const server_context& ctx) {
  const auto& c = ctx.cfg;
  if (c.device == "cuda") {
    TROUPE_ASSERT(o.cuda_backend && !ctx.draft_ckpt);  // make_context and validate checked
    return [make = o.cuda_backend, ckpt = ctx.ckpt, n = ctx.num_blocks, bs = c.block_size] {
      return std::make_unique<serve::batch_executor>(make(ckpt, n, bs));
    };
  }
  const model_runner_options ro{parse_compute_dtype(c.compute_dtype, "model.compute_dtype")};
  // The adapters as the registry holds them when the backend is made (a restart's too: those
  // loaded since start-up, and the draining ones sequences may still name).
  return [ckpt = ctx.ckpt, draft = ctx.draft_ckpt, n = ctx.num_blocks, bs = c.block_size, kv = ctx.kv_type, ro,
          adapters = ctx.facts.adapters, par = serve::parallel_of(c)] {
    auto ex = std::make_unique<serve::batch_executor>(serve::make_cpu_backend(ckpt, n, bs, kv, ro, adapters->slots(), par));
    if (draft)
      ex->set_draft(std::make_unique<serve::draft_proposer>(
          serve::make_cpu_backend(draft, n, bs, kv, ro, {}, parallel_config{1, false, par.threads}), ckpt->config.vocab_size));
    return ex;
  };
}

// Speculative decoding's draft model (speculative.model): a generative model whose guesses are ids
// of the target's vocabulary (make_context checks its context length against max_model_len).
std::shared_ptr<const checkpoint> load_draft_model(const server_context& ctx) {
  const std::string& dir = ctx.cfg.speculative_model;
  if (dir.empty()) return nullptr;
  quant::load_options lo;
  if (!ctx.cfg.use_mmap) lo.weights = residency::huge_pages;
  std::shared_ptr<const checkpoint> draft;
  try {
    draft = quant::load_model(dir, lo);
  } catch (const troupe::error& e) {
    throw troupe::error(e.code(), "speculative.model (--speculative-model): " + std::string(e.what()));
  }
  if (const auto why = draft_model_problem(*draft, *ctx.ckpt); !why.empty())
    throw_error(errc::invalid_argument, "speculative.model '" + dir + "': " + why);
  return draft;
}

std::shared_ptr<server_context> make_context(const server_options& o, bool& clamped) {
  auto ctx = std::make_shared<server_context>();
  ctx->cfg = o.cfg;
  serve::validate(ctx->cfg);
  ctx->log = o.log_sink ? o.log_sink : [](const std::string& line) { std::fprintf(stderr, "troupe serve: %s\n", line.c_str()); };
  if (ctx->cfg.device == "cuda" && !o.cuda_backend)
    throw_error(errc::unsupported, "model.device = 'cuda' (--device cuda): this troupe was built without CUDA "
                                   "(nvcc was not found when it was configured; docs/cuda.md)");
  // Float, pre-quantized (Qwen's FP8, Troupe's INT8) or quantized on load (model.quantization).
  quant::load_options lo;
  lo.quantization = quant::parse_method(ctx->cfg.quantization, "model.quantization (--quantization)");
  if (!ctx->cfg.use_mmap) lo.weights = residency::huge_pages;
  lo.rope_scaling = ctx->cfg.rope_scaling;
  lo.generation_config = ctx->cfg.generation_config;
  lo.override_generation_config = ctx->cfg.override_generation_config;
  ctx->ckpt = std::shared_ptr<const checkpoint>(quant::load_model(o.model_dir, lo));
  ctx->kv_type = parse_kv_cache_dtype(ctx->cfg.kv_cache_dtype);
  const auto& mc = ctx->ckpt->config;

  std::string tok_dir = o.tokenizer_dir;
  if (tok_dir.empty() && fs::exists(fs::path(o.model_dir) / "tokenizer.json")) tok_dir = o.model_dir;
  if (!tok_dir.empty()) ctx->tok = std::make_unique<tokenizer>(tok_dir);

  auto& f = ctx->facts;
  f.aliases = serve::parse_served_model_names(ctx->cfg.served_model_name);
  f.name = f.aliases.empty() ? directory_name(o.model_dir) : f.aliases.front();
  if (!f.aliases.empty()) f.aliases.erase(f.aliases.begin());
  f.vocab_size = mc.vocab_size;
  f.hidden_size = mc.hidden_size;
  f.default_max_tokens = ctx->cfg.default_max_tokens;
  f.generation = ctx->ckpt->generation;
  f.tok = ctx->tok.get();
  // LoRA adapters: loaded (and checked against the model) now, so a bad one stops the start.
  std::vector<std::shared_ptr<const lora_adapter>> adapters;
  for (auto& [name, dir] : serve::parse_lora_modules(ctx->cfg.lora_modules)) {
    adapters.push_back(std::make_shared<const lora_adapter>(load_lora_adapter(dir, mc, name)));
    check_lora_rank(*adapters.back(), ctx->cfg.max_lora_rank, serve::kMaxLoraRank);
  }
  f.adapters = std::make_shared<serve::adapter_registry>(std::move(adapters));
  // Tensor and pipeline parallelism: a model the group or the stages cannot split stops the start,
  // with the field named.
  check_parallel(*ctx->ckpt, serve::parallel_of(ctx->cfg));
  // A Qwen3Model export with untied embeddings (Qwen3-Embedding-8B) has no lm_head: served for
  // embeddings only, generation refused per request (build_generate), as vLLM's pooling runner.
  f.embedding_only = ctx->ckpt->no_lm_head;
  // A Qwen3ForSequenceClassification: scores (rerank with one label), embeds, never generates.
  f.labels = ctx->ckpt->config.labels;
  // Structured output walks the vocabulary as bytes in a trie: built on the first structured
  // request, then shared, as are the automata of grammars that requests repeat.
  if (ctx->tok)
    f.grammars = std::make_shared<grammar::automaton_cache>(
        [tok = ctx->tok.get()] { return grammar::token_table::from_tokenizer(*tok); });
  const std::string& custom = ctx->cfg.chat_template;
  if (!custom.empty() && tok_dir.empty())
    throw_error(errc::invalid_argument, "model.chat_template (--chat-template): the model is served without a "
                                        "tokenizer, so chat requests cannot be served; give --tokenizer DIR");
  auto template_defaults = serve::parse_template_defaults(ctx->cfg.default_chat_template_kwargs);
  f.default_enable_thinking = template_defaults.enable_thinking;
  f.trust_request_chat_template = ctx->cfg.trust_request_chat_template;
  if (!tok_dir.empty()) {
    try {
      auto tmpl = std::make_shared<const chat_template>(chat_template::from_directory(tok_dir, custom));
      f.chat = serve::make_chat_renderer(tmpl, std::move(template_defaults.kwargs));
      f.tool_format = serve::tool_call_format_for(tmpl->source());
    } catch (const troupe::error& e) {
      // A template asked for that cannot be used stops the start.
      if (!custom.empty()) throw troupe::error(e.code(), std::string("model.chat_template (--chat-template): ") + e.what());
      // Text prompts still work; chat requests get `unsupported` naming the missing template.
      std::fprintf(stderr, "troupe serve: no chat template (%s): chat requests are refused\n", e.what());
    }
  }

  if (ctx->cfg.tool_call_parser != "auto")
    f.tool_format = ctx->cfg.tool_call_parser == "qwen3_coder" ? serve::tool_call_format::qwen3_coder
                                                                : serve::tool_call_format::hermes;

  int32_t bs = ctx->cfg.block_size;
  // The budget covers what the group stores: a KV head replicated on several ranks counts each time.
  // A draft model's pool has as many blocks: the budget is shared in proportion to their token bytes.
  const int64_t budget = ctx->cfg.kv_cache_memory_bytes;
  ctx->draft_ckpt = load_draft_model(*ctx);
  int64_t target_budget = budget;
  if (ctx->draft_ckpt) {
    const auto t = static_cast<double>(kv_cache::token_bytes(stored_kv_config(mc, ctx->cfg.tensor_parallel_size), ctx->kv_type));
    const auto d = static_cast<double>(kv_cache::token_bytes(ctx->draft_ckpt->config, ctx->kv_type));
    target_budget = static_cast<int64_t>(static_cast<double>(budget) * t / (t + d));
  }
  ctx->num_blocks = ctx->cfg.num_kv_blocks > 0
                        ? ctx->cfg.num_kv_blocks
                        : kv_cache::blocks_for_budget(stored_kv_config(mc, ctx->cfg.tensor_parallel_size),
                                                      static_cast<size_t>(target_budget), bs, ctx->kv_type);
  int64_t pool_tokens = int64_t{ctx->num_blocks} * bs;
  int64_t model_len = mc.context_length() > 0 ? mc.context_length() : pool_tokens;
  int64_t max_len = ctx->cfg.max_model_len > 0 ? ctx->cfg.max_model_len : model_len;
  if (max_len > model_len)
    throw_error(errc::invalid_argument,
                "max_model_len " + std::to_string(max_len) + " exceeds the model's context length (" +
                    std::to_string(model_len) +
                    (mc.rope.type == rope_scaling_type::none
                         ? std::string(": max_position_embeddings; config.json's rope_scaling can extend it)")
                         : std::string(" with ") + rope_scaling_name(mc.rope.type) + " RoPE scaling)"));
  if (pool_tokens < max_len) {
    if (ctx->cfg.max_model_len > 0)
      throw_error(errc::invalid_argument,
                  "the KV pool (" + std::to_string(ctx->num_blocks) + " blocks of " + std::to_string(bs) +
                      " tokens) cannot hold one max_model_len (" + std::to_string(max_len) +
                      ") sequence: raise kv_cache.kv_cache_memory_bytes / num_kv_blocks or lower max_model_len");
    max_len = pool_tokens;  // not asked for explicitly: fit the model length to the pool
    clamped = true;
  }
  f.max_model_len = static_cast<int32_t>(max_len);
  if (ctx->draft_ckpt && ctx->draft_ckpt->config.context_length() > 0 && ctx->draft_ckpt->config.context_length() < max_len)
    throw_error(errc::invalid_argument, "speculative.model '" + ctx->cfg.speculative_model + "': its context length (" +
                                            std::to_string(ctx->draft_ckpt->config.context_length()) +
                                            ") is below max_model_len (" + std::to_string(max_len) +
                                            "); lower --max-model-len");

  auto& s = ctx->sched;
  s.max_num_seqs = ctx->cfg.max_num_seqs;
  s.max_num_batched_tokens = ctx->cfg.max_num_batched_tokens;
  s.max_model_len = f.max_model_len;
  s.enable_chunked_prefill = ctx->cfg.enable_chunked_prefill;
  s.long_prefill_token_threshold = ctx->cfg.long_prefill_token_threshold;
  s.max_prefill_tokens_while_decoding = ctx->cfg.max_prefill_tokens_while_decoding;
  s.max_waiting = ctx->cfg.max_waiting;
  s.static_batching = ctx->cfg.static_batching;
  s.max_loras = ctx->cfg.max_loras;
  s.speculative = {ctx->cfg.num_speculative_tokens, ctx->cfg.prompt_lookup_min, ctx->cfg.prompt_lookup_max};
  s.draft_model = ctx->draft_ckpt != nullptr;
  s.speculation_max_running = ctx->cfg.speculative_disable_by_batch_size;
  // A guess's price against a step: on a memory-bound decode, the ratio of the weights read.
  if (s.draft_model && ctx->cfg.adaptive_draft_length)
    s.draft_cost = draft_guess_cost(*ctx->draft_ckpt, *ctx->ckpt);
  set_prefix_caching(*ctx);
  plugin_host::policy_settings ps;
  ps.policy = ctx->cfg.policy;
  ps.config = ctx->cfg.policy_config;
  ps.plugin_dirs = serve::split_dirs(ctx->cfg.plugin_dirs);
  ps.starvation_limit = ctx->cfg.policy_starvation_limit;
  ctx->policy = std::make_shared<plugin_host::policy_control>(std::move(ps));
  // Fail here, with the message, rather than inside the scheduler actor (restart loop): this
  // also loads the policy plugin once (a wrong ABI or a refused config stops the start).
  sched::scheduler probe(s, ctx->num_blocks, bs, ctx->policy->initial());
  ctx->executors = std::make_shared<executor_source>(executor_factory(o, *ctx));
  ctx->metrics = std::make_shared<serve::metrics>(f.name);
  ctx->metrics->set_cache_config(bs, ctx->num_blocks, ctx->cfg.kv_cache_dtype, ctx->sched.enable_prefix_caching);
  if (ctx->cfg.responses_store_bytes > 0)
    ctx->responses = std::make_shared<wire::openai::response_store>(static_cast<size_t>(ctx->cfg.responses_store_bytes));
  if (ctx->cfg.conversations_store_bytes > 0)
    ctx->conversations =
        std::make_shared<wire::openai::conversation_store>(static_cast<size_t>(ctx->cfg.conversations_store_bytes));
  ctx->metrics->add_renderer([pc = ctx->policy](std::string& out, const std::string& labels) { pc->render(out, labels); });
  if (ctx->prefix_metrics)
    ctx->metrics->add_renderer(
        [pm = ctx->prefix_metrics](std::string& out, const std::string& labels) { pm->render(out, labels); });
  return ctx;
}

// Prefix caching (docs/prefix_cache.md): blocks are keyed by the model fingerprint, the KV
// dtype of the executor's pool (float32: batch_executor's kv_cache) and the quantized arithmetic, so
// replicas agree exactly when their K/V would. With a Redis URL, the settings of the prefix-cache actors.
void set_prefix_caching(server_context& ctx) {
  const auto& c = ctx.cfg;
  auto& s = ctx.sched;
  if (!c.enable_prefix_caching) return;
  s.enable_prefix_caching = true;
  s.prefix_identity.model_fingerprint = model_fingerprint(*ctx.ckpt);
  s.prefix_identity.kv_dtype = std::string(kv_cache::kv_dtype_name(ctx.kv_type));
  s.prefix_identity.arithmetic = quant::kernel_arithmetic(*ctx.ckpt);  // quantized: differs between CPUs
  // A tensor-parallel group adds its partial sums in another order: its K/V differ in the last bits
  // from another group size's, so entries are shared only between replicas of the same size.
  if (c.tensor_parallel_size > 1)
    s.prefix_identity.arithmetic += (s.prefix_identity.arithmetic.empty() ? "tp" : "-tp") + std::to_string(c.tensor_parallel_size);
  // Expert parallelism sums a MoE layer's experts in another order again.
  if (splits_experts(ctx.ckpt->config, {c.tensor_parallel_size, c.enable_expert_parallel}))
    s.prefix_identity.arithmetic += "ep";
  // The device computes other roundings (cuBLAS's blocking, W8A8 for FP8 weights): its K/V are
  // shared with replicas on the same device kind only.
  if (c.device != "cpu") s.prefix_identity.arithmetic += (s.prefix_identity.arithmetic.empty() ? "" : "-") + c.device;
  // bf16 compute rounds the activations, and the AMX tiles sum in their own order (bf16 compute,
  // and f32 compute of BF16 weights): such K/V are shared with replicas that compute the same bits only.
  if (const std::string a = serve::compute_arithmetic(c); !a.empty() && (a != "f32-amx" || c.device == "cpu"))
    s.prefix_identity.arithmetic += (s.prefix_identity.arithmetic.empty() ? "" : "-") + a;
  s.prefix_identity.block_size = c.block_size;
  if (!c.redis_url.empty()) {
    auto& p = ctx.prefix;
    p.remote = true;
    p.redis.url = prefix::parse_redis_url(c.redis_url);
    p.redis.connect_timeout = std::chrono::milliseconds(c.redis_connect_timeout_ms);
    p.redis.backoff_initial = std::chrono::milliseconds(c.redis_backoff_initial_ms);
    p.redis.backoff_max = std::chrono::milliseconds(c.redis_backoff_max_ms);
    p.remote_opts.ns = c.prefix_namespace;
    p.remote_opts.ttl = std::chrono::seconds(c.prefix_ttl_s);
    p.remote_opts.fetch_budget = std::chrono::milliseconds(c.prefix_fetch_budget_ms);
    p.remote_opts.publish_budget = std::chrono::milliseconds(c.prefix_publish_budget_ms);
    p.remote_opts.strategy = c.prefix_lookup_strategy == "binary_search" ? prefix::lookup_strategy::binary_search
                                                                          : prefix::lookup_strategy::pipelined;
    p.remote_opts.max_fetch_bytes = static_cast<size_t>(c.prefix_max_fetch_bytes);
    p.identity = s.prefix_identity;
    p.layout = prefix::layout_for(ctx.ckpt->config, c.block_size, ctx.kv_type);
    p.max_publish_queue_bytes = static_cast<size_t>(c.prefix_max_publish_queue_bytes);
    // Checks the identity and layout here, with the message, not in the supervisor's spawn.
    prefix::block_codec probe(p.identity.key_component(), p.layout);
    s.prefix_options.remote = true;
    s.prefix_options.remote_block_bytes = p.layout.payload_bytes();
    s.prefix_options.max_pending_remote_bytes = static_cast<size_t>(c.prefix_max_pending_remote_bytes);
    ctx.prefix_cost = std::make_shared<prefix::cost_model>();
  }
  ctx.prefix_metrics = std::make_shared<prefix::prefix_metrics>(ctx.prefix_cost);
}

bind_result wait_bound(std::promise<bind_result>& p) {
  auto fut = p.get_future();
  if (fut.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
    throw_error(errc::internal, "the network actor did not start within 30 s");
  auto r = fut.get();
  if (!r.error.empty()) throw_error(errc::io_error, r.error);
  return r;
}

}  // namespace

server::server(server_options opts) : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  m.ctx = make_context(opts, m.max_len_clamped);
  m.sys_cfg = std::make_unique<caf::actor_system_config>();
  m.sys_cfg->set("scheduler.max-threads", static_cast<size_t>(m.ctx->cfg.actor_threads));
  // Work sharing: idle workers wait on a condition variable. CAF's default, work stealing, polls
  // (every 50 us for ~25 ms after each burst of messages, i.e. after every step), and on a
  // machine whose cores the engine's threads fill, each wake-up stalls the engine's thread team:
  // one stream decoded at 54 ms a token instead of 42 (docs/benchmarks.md, Serving).
  m.sys_cfg->set("scheduler.policy", caf::atom_from_string(m.ctx->cfg.actor_scheduling));
  m.sys_cfg->load<caf::io::middleman>();
  m.sys = std::make_unique<caf::actor_system>(*m.sys_cfg);
  context_ptr ctx = m.ctx;
  m.supervisor = spawn_supervisor(*m.sys, ctx);
  std::vector<caf::actor> workers;
  {
    caf::scoped_actor self{*m.sys};
    self->request(m.supervisor, std::chrono::seconds(30), caf::get_atom::value)
        .receive([&](workers_msg& w) { workers = std::move(w.workers); },
                 [&](caf::error& e) { throw_error(errc::internal, "supervisor did not start: " + to_string(e)); });
  }
  try {
    std::promise<bind_result> gw;
    m.gateway = spawn_gateway(*m.sys, ctx, workers, &gw);
    const auto bound = wait_bound(gw);
    m.port = bound.port;
    m.http_port = bound.http_port;
    caf::anon_send(m.supervisor, gateway_msg{m.gateway});
    if (m.ctx->cfg.metrics_port >= 0) {
      std::promise<bind_result> mp;
      m.metrics_http = spawn_metrics_http(*m.sys, ctx, &mp);
      m.metrics_port = wait_bound(mp).port;
    }
    if (m.ctx->cfg.log_stats_interval_ms > 0) m.stats_logger = spawn_stats_logger(*m.sys, ctx, ctx->log);
  } catch (...) {
    shutdown(std::chrono::milliseconds(0));
    throw;
  }
}

server::~server() {
  if (!impl_->stopped) shutdown(std::chrono::milliseconds(0));
}

void server::shutdown(std::chrono::milliseconds grace) {
  auto& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  {
    caf::scoped_actor self{*m.sys};
    self->send(m.supervisor, drain_atom::value, static_cast<int64_t>(grace.count()));
    self->receive([](drained_atom) {}, caf::after(grace + std::chrono::seconds(10)) >> [] {
      std::fprintf(stderr, "troupe serve: in-flight requests did not end in time; stopping anyway\n");
    });
  }
  for (const auto& a : {m.gateway, m.metrics_http, m.stats_logger, m.supervisor})
    if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  m.sys->await_all_actors_done();
}

uint16_t server::port() const noexcept { return impl_->port; }
uint16_t server::metrics_port() const noexcept { return impl_->metrics_port; }
uint16_t server::http_port() const noexcept { return impl_->http_port; }
const serve::model_facts& server::model() const noexcept { return impl_->ctx->facts; }
int32_t server::num_kv_blocks() const noexcept { return impl_->ctx->num_blocks; }
serve::metrics& server::metrics() noexcept { return *impl_->ctx->metrics; }

std::string server::banner() const {
  const auto& m = *impl_;
  const auto& f = m.ctx->facts;
  const auto& c = m.ctx->cfg;
  auto mib = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, b < 10 * (1 << 20) ? "%.1f MiB" : "%.0f MiB", b / (1 << 20));
    return std::string(buf);
  };
  const double pool_bytes =
      double(m.ctx->num_blocks) * c.block_size *
      double(kv_cache::token_bytes(stored_kv_config(m.ctx->ckpt->config, c.tensor_parallel_size), m.ctx->kv_type));
  const auto q = quant::weight_quantization(*m.ctx->ckpt);
  std::string b = "troupe serve: model '" + f.name + "' (vocab " + std::to_string(f.vocab_size) + ", max_model_len " +
                  std::to_string(f.max_model_len) + (m.max_len_clamped ? ", fitted to the KV pool" : "") + ")\n";
  for (const auto& a : f.aliases) b += "  also served as '" + a + "' (served_model_name)\n";
  const std::string& stored_as = m.ctx->ckpt->stored_as;
  const std::string held = q.kind == quant::method::none               ? "as stored"
                           : q.kind == quant::method::int8 && q.bits == 4 ? "int4"
                                                                          : quant::method_name(q.kind);
  b += "  weights: " + held +
       (stored_as.empty() ? "" : " (stored as " + stored_as + ")") + ", " + mib(double(m.ctx->ckpt->weights.bytes)) +
       " read per token\n";
  if (c.device == "cuda")
    b += "  device: cuda (device 0; dense float32 step, FP8 weights as W8A8; docs/cuda.md)\n";
  else
    b += "  step threads: " + std::to_string(c.threads > 0 ? c.threads : omp_threads_now()) +
         (c.threads > 0 ? "" : " (every core, or OMP_NUM_THREADS)") + "; --threads sets it\n";
  if (c.device != "cuda" && serve::compute_arithmetic(c) == "f32-amx")
    b += "  compute: float32 activations; BF16 weights on the AMX tiles, each activation split exactly into three "
         "bf16 parts (TROUPE_ISA=avx512 for the FMA path's machine-independent bits)\n";
  if (c.device != "cuda" && serve::compute_arithmetic(c).rfind("bf16-", 0) == 0) {
    const std::string_view isa = kernels::matmul_bf16_isa();
    b += std::string("  compute: bf16 activations for BF16 weights (--compute-dtype bf16), on ") +
         (isa == "amx"           ? "the AMX tiles"
          : isa == "avx512_bf16" ? "AVX512_BF16 vdpbf16ps"
                                 : "a portable emulation (slow: no AVX512_BF16 here, or TROUPE_ISA below avx512)") +
         "\n";
  }
  if (splits_experts(m.ctx->ckpt->config, {c.tensor_parallel_size, c.enable_expert_parallel})) {
    const int64_t e = m.ctx->ckpt->config.num_experts, lo = e / c.tensor_parallel_size;
    b += "  tensor parallel: " + std::to_string(c.tensor_parallel_size) +
         " CPU shards (each its share of the heads and vocabulary), expert parallel: each holds " +
         std::to_string(lo) + (e % c.tensor_parallel_size ? " or " + std::to_string(lo + 1) : "") + " of the " +
         std::to_string(e) + " experts whole\n";
  } else if (c.tensor_parallel_size > 1)
    b += "  tensor parallel: " + std::to_string(c.tensor_parallel_size) + " CPU shards (each its share of the heads, MLP and vocabulary)\n";
  if (c.pipeline_parallel_size > 1) {
    const parallel_config par = serve::parallel_of(c);
    const auto bounds = pipeline_layer_bounds(*m.ctx->ckpt, par.pipeline_size, par.pipeline_layers);
    std::string counts;
    for (size_t s = 0; s + 1 < bounds.size(); ++s) counts += (s ? "," : "") + std::to_string(bounds[s + 1] - bounds[s]);
    const bool wave = resolved_schedule(par) == pipeline_schedule::wavefront;
    b += "  pipeline parallel: " + std::to_string(c.pipeline_parallel_size) + " stages of " + counts +
         " layers, each with its layers' KV; " +
         (wave ? "a wavefront (each stage on threads of its own)" : "in turn (each stage on every thread)") + "\n";
  }
  if (const int64_t kv = m.ctx->ckpt->config.num_key_value_heads; kv_head_replicas(kv, c.tensor_parallel_size) > 1)
    b += "  KV heads: " + std::to_string(kv) + ", each replicated on " +
         std::to_string(kv_head_replicas(kv, c.tensor_parallel_size)) + " shards (more shards than KV heads)\n";
  if (f.embedding_only)
    b += "  EMBEDDINGS ONLY: the checkpoint has no lm_head.weight; embed requests (/v1/embeddings) are served, "
         "generation is refused\n";
  if (f.num_labels() > 0)
    b += "  SEQUENCE CLASSIFIER: " + model_class_name(m.ctx->ckpt->config) + " with " + std::to_string(f.num_labels()) +
         " label(s); classify requests (/classify)" +
         (f.num_labels() == 1 ? ", rerank and score requests (/v1/rerank, /v1/score)" : "") +
         " and embed requests are served, generation is refused\n";
  b += "  tokenizer: " + std::string(f.tok ? f.tok->model_dir() : "none (prompt_ids only)") + "\n";
  if (f.chat) b += "  tool calls: " + std::string(serve::to_string(f.tool_format)) + " format\n";
  if (const rope_scaling& r = m.ctx->ckpt->config.rope; r.type != rope_scaling_type::none) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  RoPE scaling: %s x%g (context %lld tokens)\n", rope_scaling_name(r.type), r.factor,
                  static_cast<long long>(m.ctx->ckpt->config.context_length()));
    b += buf;
  }
  if (c.max_loras > 0)
    b += "  LoRA adapters: at most " + std::to_string(c.max_loras) + " running at once (max_loras)\n";
  if (c.allow_runtime_lora_updating)
    b += "  LoRA adapters: loaded and unloaded at run time too (POST /v1/load_lora_adapter, /v1/unload_lora_adapter)\n";
  for (const auto& a : m.ctx->facts.adapters->slots())
    if (a) b += "  LoRA adapter '" + a->name + "': " + a->dir + " (r " + std::to_string(a->r) + ", " +
         std::to_string(a->pairs) + " projections, " + mib(double(a->bytes())) + ")\n";
  b += "  KV pool: " + std::to_string(m.ctx->num_blocks) + " blocks x " + std::to_string(c.block_size) + " tokens (" +
       std::string(kv_cache::kv_dtype_name(m.ctx->kv_type)) + ", " + mib(pool_bytes) + "); max_num_seqs " + std::to_string(c.max_num_seqs) + ", max_num_batched_tokens " +
       std::to_string(c.max_num_batched_tokens) + (c.static_batching ? ", STATIC batching" : "") + "\n";
  if (const auto& d = m.ctx->draft_ckpt) {
    const double draft_pool = double(m.ctx->num_blocks) * c.block_size * double(kv_cache::token_bytes(d->config, m.ctx->kv_type));
    char cost[96] = "";
    if (m.ctx->sched.draft_cost > 0)
      std::snprintf(cost, sizeof cost, ", as many as each request's acceptance pays for at %.2f of a step each",
                    m.ctx->sched.draft_cost);
    b += "  speculative decoding: draft model " + c.speculative_model + " guesses up to " +
         std::to_string(c.num_speculative_tokens) + " tokens a step" + cost + " (" + mib(double(d->weights.bytes)) +
         " read per guess; its KV pool " + mib(draft_pool) + ")\n";
  } else if (c.num_speculative_tokens > 0) {
    b += "  speculative decoding: prompt lookup, up to " + std::to_string(c.num_speculative_tokens) + " drafts a step\n";
  }
  b += "  scheduling policy: " + m.ctx->policy->active() +
       (c.policy_config.empty() ? std::string() : " (" + c.policy_config + ")") +
       (c.admin_token.empty() ? "; admin requests off" : "; admin requests on (set_policy)") + "\n";
  if (!c.enable_prefix_caching)
    b += "  prefix cache: off\n";
  else if (!m.ctx->prefix.remote)
    b += "  prefix cache: on, local only (--redis URL shares it between replicas)\n";
  else
    b += "  prefix cache: on, shared through " + m.ctx->prefix.redis.url.redacted() + " (namespace '" +
         c.prefix_namespace + "', look-up budget " + std::to_string(c.prefix_fetch_budget_ms) + " ms)\n";
  b += "  listening on " + c.host + ":" + std::to_string(m.port) + " (protocol v1, docs/protocol.md)\n";
  if (m.http_port)
    b += "  OpenAI-compatible API on http://" + c.host + ":" + std::to_string(m.http_port) +
         "/v1 (chat/completions, completions, responses, embeddings, rerank, score, models; docs/openai_api.md)" +
         (c.api_key.empty() ? std::string() : "; API key required") + "\n";
  if (m.metrics_port) b += "  metrics on http://" + c.host + ":" + std::to_string(m.metrics_port) + "/metrics\n";
  return b;
}

void server::kill_executor() { caf::anon_send(impl_->supervisor, kill_exec_atom::value); }
void server::kill_scheduler() { caf::anon_send(impl_->supervisor, kill_sched_atom::value); }
void server::kill_tokenizer_worker(int32_t index) { caf::anon_send(impl_->supervisor, kill_worker_atom::value, index); }
void server::kill_prefix_cache() { caf::anon_send(impl_->supervisor, kill_prefix_atom::value); }

int server::restarts() {
  int n = -1;
  caf::scoped_actor self{*impl_->sys};
  self->request(impl_->supervisor, std::chrono::seconds(10), restarts_atom::value)
      .receive([&](int r) { n = r; }, [&](caf::error&) {});
  return n;
}

}  // namespace troupe::actors
