// Serving benchmark: starts `troupe serve` in-process on a random-weight model and drives it with
// the load generator over real TCP. Prints the speed figures as ratios measured in the
// same run (the machine is shared and noisy):
//   scaling     16 concurrent streams vs 1 stream (output tok/s)         target >= 6x
//   static      continuous vs static batching, Poisson arrivals          target >= 2x
//   prefill     decode ITL p99 while a 4,000-token prompt prefills,
//               vs the same streams with no prefill                      target < 3x
//   overhead    runtime overhead per step at 1 and 16 streams (loop - engine)  target < 5% at 16
//   chat        multi-turn chat resending the history, prefix cache on/off target >= 3x
//               (not in the default list: it runs the workload twice)
//   openai      16 streams through the OpenAI-compatible HTTP API vs the same
//               requests over msgpack, one server (output tok/s)         >= 0.95x
//
//   serving_bench [--model DIR] [--scenarios scaling,static,prefill,overhead,chat,openai] [--quick]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#ifdef TROUPE_HAVE_CUDA_SERVE
#include "runtime/serve/cuda/cuda_step_backend.hpp"
#endif
#include "actors/server.hpp"
#include "bench/serving/load.hpp"
#include "bench/serving/load_http.hpp"
#include "examples/cpp/troupe_client.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace troupe;
using namespace troupe::bench;

namespace {

// The default benchmark model: a Qwen3 of 8 layers and hidden 512 (~44M parameters, bf16):
// big enough that a step is mostly matrix work, small enough for a 2-core machine.
model_config bench_shape() {
  model_config c = preset_config("tiny");
  c.vocab_size = 32768;
  c.hidden_size = 512;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 1536;
  c.max_position_embeddings = 8192;
  c.bos_token_id = 32766;
  c.eos_token_ids = {32767};
  return c;
}

// full_vocab: the real tokenizer's 151,936 rows (its added tokens, such as a chat or reranker
// prompt's <|im_start|>, inside the model's vocabulary).
std::string ensure_model(const std::string& dir, bool full_vocab = false) {
  if (!fs::exists(fs::path(dir) / "config.json")) {
    std::printf("making the benchmark model in %s ...\n", dir.c_str());
    std::fflush(stdout);
    random_checkpoint_options o;
    auto g = qwen3_generation_defaults();
    auto shape = bench_shape();
    if (full_vocab) {
      shape.vocab_size = 151936;
      shape.bos_token_id = 151643;
      shape.eos_token_ids = {151645};
    } else {
      g.eos_token_ids = {32767};
    }
    write_random_checkpoint(dir, shape, g, o);
  }
  return dir;
}

std::vector<int32_t> prompt(std::mt19937_64& rng, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(rng() % 30000);
  return p;
}

// Chunking beside decodes for every scenario (--prefill-chunk, --slowdown-percent): the server's
// defaults unless given.
int g_chunk = serve::server_config{}.max_prefill_tokens_while_decoding;
int g_slowdown = serve::server_config{}.decode_slowdown_percent;
std::string g_compute = serve::server_config{}.compute_dtype;  // --compute-dtype
int32_t g_tp = 1;                                               // --tensor-parallel-size
int32_t g_pp = 1;                                               // --pipeline-parallel-size
std::string g_pp_schedule = "auto";                              // --pipeline-schedule
std::string g_device = "cpu";                                    // --device
bool g_ep = false;                                              // --enable-expert-parallel

serve::server_config base_config() {
  serve::server_config c;
  c.max_prefill_tokens_while_decoding = g_chunk;
  c.decode_slowdown_percent = g_slowdown;
  c.compute_dtype = g_compute;
  c.tensor_parallel_size = g_tp;
  c.pipeline_parallel_size = g_pp;
  c.pipeline_schedule = g_pp_schedule;
  c.device = g_device;
  c.enable_expert_parallel = g_ep;
  c.port = 0;
  c.http_port = -1;
  c.metrics_port = -1;
  c.max_model_len = 4608;
  c.num_kv_blocks = 2048;  // 32k tokens
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 512;
  c.shutdown_grace_ms = 0;
  return c;
}

std::unique_ptr<actors::server> start(const std::string& model, const serve::server_config& c) {
  actors::server_options o;
  o.cfg = c;
  o.model_dir = model;
#ifdef TROUPE_HAVE_CUDA_SERVE
  o.cuda_backend = [](std::shared_ptr<const checkpoint> ck, int32_t blocks, int32_t block_size) {
    return serve::make_cuda_backend(*ck, blocks, block_size);
  };
#endif
  return std::make_unique<actors::server>(o);
}

void print_summary(const char* label, const load_summary& s) {
  std::printf("  %-26s %6.2f req/s %8.1f tok/s  TTFT p50 %7.1f p99 %7.1f ms  ITL p50 %6.1f p99 %6.1f ms\n", label,
              s.req_per_s, s.tok_per_s, s.ttft_p50_ms, s.ttft_p99_ms, s.itl_p50_ms, s.itl_p99_ms);
  std::fflush(stdout);
}

double metric(actors::server& s, const std::string& name) {
  auto text = s.metrics().render();
  auto pos = text.find("\ntroupe:" + name + "{");
  if (pos == std::string::npos) return 0;
  auto sp = text.find("} ", pos);
  return std::stod(text.substr(sp + 2, text.find('\n', sp) - sp - 2));
}

void print_pacer(actors::server& srv) {
  std::printf("  pacer at the end: cap %.0f prompt tokens, decode step %.1f ms, +%.2f ms per prompt token\n",
              metric(srv, "prefill_tokens_while_decoding"), metric(srv, "decode_step_seconds") * 1e3,
              metric(srv, "prompt_token_step_seconds") * 1e3);
}

void verdict(const char* what, double value, const char* op, double target, bool ok) {
  std::printf("  => %-44s %6.2f (target %s %.2f): %s\n", what, value, op, target, ok ? "MET" : "NOT MET");
  std::fflush(stdout);
}

// 1 stream vs 16 streams, same requests, closed loop.
void scaling(const std::string& model, bool quick) {
  std::printf("\n[scaling] prompt 64, output 64 tokens, closed loop\n");
  std::mt19937_64 rng(1);
  auto srv = start(model, base_config());
  std::vector<load_request> one(quick ? 3 : 6), many(quick ? 32 : 64);
  for (auto& r : one) r = {prompt(rng, 64), 64, 0};
  for (auto& r : many) r = {prompt(rng, 64), 64, 0};
  run_load(srv->port(), {{prompt(rng, 16), 4, 0}}, 1);  // warm-up
  auto s1 = summarize(run_load(srv->port(), one, 1));
  print_summary("1 stream", s1);
  auto s16 = summarize(run_load(srv->port(), many, 16));
  print_summary("16 streams", s16);
  print_pacer(*srv);
  verdict("16 streams / 1 stream (output tok/s)", s16.tok_per_s / s1.tok_per_s, ">=", 6, s16.tok_per_s >= 6 * s1.tok_per_s);
}

// Poisson arrivals, mixed output lengths: continuous batching vs static batching.
void static_vs_continuous(const std::string& model, bool quick) {
  int n = quick ? 48 : 96;
  double rate = 6.0;  // req/s: above what static batching sustains, below continuous capacity
  std::printf("\n[static] %d requests, Poisson %.1f req/s, prompt 16-128, output 8-192 tokens, max 16 running\n", n,
              rate);
  std::mt19937_64 rng(2);
  std::vector<load_request> reqs(static_cast<size_t>(n));
  for (auto& r : reqs) {
    r.prompt = prompt(rng, 16 + static_cast<int>(rng() % 113));
    r.max_tokens = 8 + static_cast<int32_t>(rng() % 185);
  }
  assign_arrivals(reqs, rate, rng);
  load_summary cont, stat;
  {
    auto srv = start(model, base_config());
    run_load(srv->port(), {{prompt(rng, 16), 4, 0}}, 1);
    cont = summarize(run_load(srv->port(), reqs, 1 << 20));
    print_summary("continuous batching", cont);
  }
  {
    auto c = base_config();
    c.static_batching = true;
    auto srv = start(model, c);
    run_load(srv->port(), {{prompt(rng, 16), 4, 0}}, 1);
    stat = summarize(run_load(srv->port(), reqs, 1 << 20));
    print_summary("static batching", stat);
  }
  verdict("continuous / static (output tok/s)", cont.tok_per_s / stat.tok_per_s, ">=", 2,
          cont.tok_per_s >= 2 * stat.tok_per_s);
  verdict("continuous / static (req/s)", cont.req_per_s / stat.req_per_s, ">=", 2, cont.req_per_s >= 2 * stat.req_per_s);
}

// 15 decoding streams; at t = 2 s a 4,000-token prompt arrives. ITL p99 of the decodes while it
// prefills vs before it came. What bounds the step is max_prefill_tokens_while_decoding (the
// server's default unless --prefill-chunk says otherwise); the budget stays the default.
void prefill_interference(const std::string& model, double t_long) {
  const int chunk = g_chunk, slowdown = g_slowdown;
  std::printf("\n[prefill] 15 decode streams, then one 4000-token prompt at %.0f s (max_prefill_tokens_while_decoding %d, "
              "decode_slowdown_percent %d)\n", t_long, chunk, slowdown);
  std::mt19937_64 rng(3);
  auto c = base_config();
  auto srv = start(model, c);
  run_load(srv->port(), {{prompt(rng, 16), 4, 0}}, 1);
  std::vector<load_request> reqs;
  for (int i = 0; i < 15; ++i) reqs.push_back({prompt(rng, 32), 4000, 0});
  reqs.push_back({prompt(rng, 4000), 1, t_long});
  auto res = run_load(srv->port(), reqs, 16, /*until=*/15);
  double prefill_end = res[15].first_token_s;
  auto idle = itl_between(res, 0.5, t_long);
  auto busy = itl_between(res, t_long + 0.05, prefill_end);
  double idle_p99 = percentile(idle, 99), busy_p99 = percentile(busy, 99);
  std::printf("  idle:    ITL p50 %6.1f p99 %6.1f ms (%zu gaps)\n", percentile(idle, 50), idle_p99, idle.size());
  std::printf("  prefill: ITL p50 %6.1f p99 %6.1f ms (%zu gaps); the 4000-token prompt took %.2f s to its first token\n",
              percentile(busy, 50), busy_p99, busy.size(), prefill_end - res[15].sent_s);
  print_pacer(*srv);
  verdict("ITL p99 during prefill / idle", busy_p99 / idle_p99, "<", 3, busy_p99 < 3 * idle_p99);
}

// Runtime overhead from the server's own counters: time per step outside the engine (planning,
// messages, applying results, detokenising) over the whole loop, at 16 streams (issue 4's figure)
// and at one (where a step is shortest, so any fixed cost shows most).
void overhead(const std::string& model, bool quick) {
  for (const int streams : {1, 16}) {
    std::printf("\n[overhead] %d stream%s, prompt 32, output 128\n", streams, streams > 1 ? "s" : "");
    std::mt19937_64 rng(4);
    auto srv = start(model, base_config());
    run_load(srv->port(), {{prompt(rng, 16), 4, 0}}, 1);
    double e0 = metric(*srv, "engine_step_seconds_total"), l0 = metric(*srv, "scheduler_loop_seconds_total"),
           n0 = metric(*srv, "engine_steps_total");
    std::vector<load_request> reqs(streams == 1 ? 2 : quick ? 16 : 32);
    for (auto& r : reqs) r = {prompt(rng, 32), 128, 0};
    auto s = summarize(run_load(srv->port(), reqs, streams));
    print_summary(streams == 1 ? "1 stream" : "16 streams", s);
    double engine = metric(*srv, "engine_step_seconds_total") - e0, loop = metric(*srv, "scheduler_loop_seconds_total") - l0;
    double steps = metric(*srv, "engine_steps_total") - n0;
    std::printf("  %.0f steps: engine %.2f ms/step, loop %.2f ms/step, overhead %.3f ms/step\n", steps,
                engine / steps * 1e3, loop / steps * 1e3, (loop - engine) / steps * 1e3);
    double frac = (loop - engine) / loop;
    if (streams == 16) verdict("runtime overhead / step time", frac * 100, "<", 5, frac < 0.05);
  }
}

// The OpenAI-compatible API's cost: 16 streams of the same requests over msgpack and over HTTP
// (server-sent events, JSON per token, a connection per request), alternating on one server.
void openai_vs_msgpack(const std::string& model, bool quick) {
  std::printf("\n[openai] 16 streams, prompt 64, output 64 tokens, closed loop; msgpack and HTTP alternating\n");
  std::mt19937_64 rng(5);
  auto c = base_config();
  c.http_port = 0;
  auto srv = start(model, c);
  std::vector<load_request> reqs(quick ? 16 : 32);
  for (auto& r : reqs) r = {prompt(rng, 64), 64, 0};
  run_load(srv->port(), reqs, 16);  // warm-up at full load (the first round ran 25% slow), both ways
  run_load_http(srv->http_port(), reqs, 16);
  double mp = 0, http = 0;
  for (int round = 0; round < 2; ++round) {
    auto m = summarize(run_load(srv->port(), reqs, 16));
    print_summary("msgpack", m);
    auto h = summarize(run_load_http(srv->http_port(), reqs, 16));
    print_summary("OpenAI HTTP (SSE)", h);
    mp += m.tok_per_s;
    http += h.tok_per_s;
  }
  verdict("HTTP / msgpack (output tok/s)", http / mp, ">=", 0.95, http >= 0.95 * mp);
}

// Multi-turn chat through the server, with the prefix cache on and off: `conversations` clients
// at once, each turn resending its whole history (a shared system prompt, then every earlier user
// message and answer) plus a new user message, closed loop. Throughput = answer tokens / wall time.
struct chat_shape {
  int conversations = 4, turns = 6, system_tokens = 1024, user_tokens = 64, answer_tokens = 64;
};

struct chat_run {
  double wall_s = 0;
  int64_t answer_tokens = 0, cached_tokens = 0, prompt_tokens = 0;
  double hit_rate = 0;
  std::vector<std::vector<int32_t>> transcripts;  // every conversation's final history
};

chat_run run_chat(const std::string& model, const chat_shape& shape, bool cache) {
  auto c = base_config();
  c.enable_prefix_caching = cache;
  auto srv = start(model, c);
  std::mt19937_64 rng(7);
  const auto system = prompt(rng, shape.system_tokens);
  std::vector<std::vector<std::vector<int32_t>>> user(static_cast<size_t>(shape.conversations));
  for (auto& conv : user)
    for (int t = 0; t < shape.turns; ++t) conv.push_back(prompt(rng, shape.user_tokens));
  chat_run r;
  r.transcripts.resize(user.size());
  std::vector<int64_t> answers(user.size()), cached(user.size()), prompts(user.size());
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < user.size(); ++k)
    threads.emplace_back([&, k] {
      client::client cl("127.0.0.1", srv->port());
      auto& history = r.transcripts[k];
      history = system;
      for (int t = 0; t < shape.turns; ++t) {
        history.insert(history.end(), user[k][static_cast<size_t>(t)].begin(), user[k][static_cast<size_t>(t)].end());
        wire::generate_request g;
        g.kind = wire::prompt_kind::ids;
        g.prompt_ids = history;
        g.max_tokens = shape.answer_tokens;
        g.ignore_eos = true;
        g.sampling.temperature = 0.0;
        auto out = cl.complete(g);
        history.insert(history.end(), out.ids.begin(), out.ids.end());
        answers[k] += static_cast<int64_t>(out.ids.size());
        cached[k] += out.done.usage.cached_prompt_tokens;
        prompts[k] += out.done.usage.prompt_tokens;
      }
    });
  for (auto& t : threads) t.join();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t k = 0; k < user.size(); ++k) {
    r.answer_tokens += answers[k];
    r.cached_tokens += cached[k];
    r.prompt_tokens += prompts[k];
  }
  r.hit_rate = metric(*srv, "prefix_cache_hit_rate");
  return r;
}

void chat(const std::string& model, const chat_shape& shape) {
  std::printf("\n[chat] %d conversations x %d turns at once: %d-token system prompt, %d new user tokens and %d "
              "answer tokens a turn, whole history resent each turn\n",
              shape.conversations, shape.turns, shape.system_tokens, shape.user_tokens, shape.answer_tokens);
  std::fflush(stdout);
  auto on = run_chat(model, shape, true);
  std::printf("  cache on:  %7.1f s  %6.2f answer tok/s  prompt tokens %lld, %lld from the cache (hit rate %.1f%%)\n",
              on.wall_s, on.answer_tokens / on.wall_s, static_cast<long long>(on.prompt_tokens),
              static_cast<long long>(on.cached_tokens), on.hit_rate * 100);
  std::fflush(stdout);
  auto off = run_chat(model, shape, false);
  std::printf("  cache off: %7.1f s  %6.2f answer tok/s  prompt tokens %lld, %lld from the cache\n", off.wall_s,
              off.answer_tokens / off.wall_s, static_cast<long long>(off.prompt_tokens),
              static_cast<long long>(off.cached_tokens));
  std::printf("  transcripts identical with and without the cache: %s\n", on.transcripts == off.transcripts ? "yes" : "NO");
  const double ratio = (on.answer_tokens / on.wall_s) / (off.answer_tokens / off.wall_s);
  verdict("chat throughput, cache on / off", ratio, ">=", 3, ratio >= 3 && on.transcripts == off.transcripts);
}

// Reranking's cost: documents against one query through the rerank request, then the same prompts
// as generate requests of one token (their prefill alone, the same step budget), all sent at once,
// prefix caching off: documents/s of each and the ratio of their prompt tokens/s (1: nothing beyond
// the prefill). Then with prefix caching on: every prompt starts with the same system turn,
// instruction and query, so a second rerank of other documents reuses those blocks.
void rerank_cost(std::string model, bool quick) {
  const int n = quick ? 16 : 32;
  // The default benchmark model's vocabulary stops at 32,768: the reranker's prompt needs the whole one.
  if (model.empty()) model = ensure_model((fs::temp_directory_path() / "troupe-bench-small-full-vocab").string(), true);
  std::printf("\n[rerank] %d documents of 40 words against one query (Qwen3-Reranker's prompt), then the same "
              "prompts as generate with max_tokens 1\n", n);
  const tokenizer tok(model);
  std::mt19937_64 rng(11);
  const char* words[] = {"the", "paged", "cache", "holds", "keys", "and", "values", "in", "blocks", "of", "sixteen",
                         "tokens", "while", "a", "scheduler", "batches", "requests", "from", "many", "users"};
  auto documents = [&] {
    std::vector<std::string> docs(static_cast<size_t>(n));
    for (auto& d : docs) {
      for (int w = 0; w < 40; ++w) d += std::string(w ? " " : "") + words[rng() % std::size(words)];
      d += ".";
    }
    return docs;
  };
  const std::string query = "How does a paged KV cache store keys and values?";
  auto timed_rerank = [&](client::client& cl, const std::string& id, std::vector<std::string> docs) {
    wire::generate_request r;
    r.id = id;
    r.rerank = wire::rerank_fields{{query}, std::move(docs), std::nullopt};
    const auto t0 = std::chrono::steady_clock::now();
    cl.rerank(r);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto c = base_config();
  c.enable_prefix_caching = false;
  const auto docs = documents();
  double rerank_s = 0, generate_s = 0;
  int64_t tokens = 0;
  {
    auto srv = start(model, c);
    client::client cl("127.0.0.1", srv->port());
    timed_rerank(cl, "warm", documents());  // first steps, the tokenizer's caches
    rerank_s = timed_rerank(cl, "rr", docs);
    std::vector<load_request> reqs;
    for (const auto& d : docs) {
      reqs.push_back({serve::rerank_prompt(tok, serve::kDefaultRerankInstruction, query, d), 1, 0});
      tokens += static_cast<int64_t>(reqs.back().prompt.size());
    }
    generate_s = summarize(run_load(srv->port(), reqs, n)).wall_s;
  }
  std::printf("  rerank:   %6.3f s  %6.1f documents/s  %7.0f prompt tok/s  (%lld prompt tokens, prefix cache off)\n",
              rerank_s, n / rerank_s, tokens / rerank_s, static_cast<long long>(tokens));
  std::printf("  generate: %6.3f s  %6.1f prompts/s    %7.0f prompt tok/s\n", generate_s, n / generate_s, tokens / generate_s);
  std::printf("  => rerank / generate prompt throughput              %.2f\n", generate_s / rerank_s);
  c.enable_prefix_caching = true;
  auto srv = start(model, c);
  client::client cl("127.0.0.1", srv->port());
  timed_rerank(cl, "warm", documents());  // the shared prefix's blocks are now cached
  const double cached_s = timed_rerank(cl, "rr", documents());
  std::printf("  rerank with the prefix cache (new documents, the same query): %6.3f s, %6.1f documents/s (%.2fx)\n",
              cached_s, n / cached_s, rerank_s / cached_s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Troupe serving benchmark (load generator over TCP)"};
  std::string model, scenarios = "scaling,static,prefill,overhead";
  bool quick = false;
  double t_long = 5.0;
  app.add_option("--model", model, "checkpoint directory (default: a random 44M-parameter Qwen3 made once)");
  app.add_option("--scenarios", scenarios, "comma-separated: scaling, static, prefill, overhead, chat, openai, rerank");
  app.add_option("--prefill-chunk", g_chunk, "scheduler.max_prefill_tokens_while_decoding (default: the server's)");
  app.add_option("--slowdown-percent", g_slowdown, "scheduler.decode_slowdown_percent (0: the fixed cap; default: the server's)");
  app.add_option("--compute-dtype", g_compute, "model.compute_dtype: f32 (exact, the default) or bf16 (docs/engine.md)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--device", g_device, "model.device: cpu or cuda (the CUDA runner; docs/cuda.md)");
  app.add_option("--tensor-parallel-size", g_tp, "model.tensor_parallel_size: CPU shards each step is split over (docs/engine.md)");
  app.add_option("--pipeline-parallel-size", g_pp, "model.pipeline_parallel_size: pipeline stages the layers are split into");
  app.add_option("--pipeline-schedule", g_pp_schedule, "model.pipeline_schedule: auto, wavefront or in_turn");
  app.add_flag("--enable-expert-parallel", g_ep, "model.enable_expert_parallel: whole experts per shard in MoE layers");
  app.add_option("--long-prompt-at", t_long, "seconds of idle decoding before the long prompt arrives");
  app.add_flag("--quick", quick, "fewer requests");
  chat_shape shape;
  app.add_option("--chat-conversations", shape.conversations);
  app.add_option("--chat-turns", shape.turns);
  app.add_option("--chat-system-tokens", shape.system_tokens);
  app.add_option("--chat-user-tokens", shape.user_tokens);
  app.add_option("--chat-answer-tokens", shape.answer_tokens);
  CLI11_PARSE(app, argc, argv);
  const std::string given = model;
  if (model.empty()) model = ensure_model((fs::temp_directory_path() / "troupe-bench-small").string());
  std::printf("model %s\n", model.c_str());
  std::stringstream ss(scenarios);
  try {
    for (std::string s; std::getline(ss, s, ',');) {
      if (s == "scaling") scaling(model, quick);
      else if (s == "static") static_vs_continuous(model, quick);
      else if (s == "prefill") prefill_interference(model, t_long);
      else if (s == "overhead") overhead(model, quick);
      else if (s == "chat") chat(model, shape);
      else if (s == "openai") openai_vs_msgpack(model, quick);
      else if (s == "rerank") rerank_cost(given, quick);
      else {
        std::fprintf(stderr, "unknown scenario '%s'\n", s.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {  // a server that cannot start (no device, a bad setting)
    std::fprintf(stderr, "serving_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
