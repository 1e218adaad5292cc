// troupe-bench-prefix: what prefix caching buys, on the Qwen3-0.6B-shaped checkpoint by default.
//   ttft: time to first token of a request whose first N tokens are cached — cold, cached in the
//         same replica, and fetched from Redis after another replica computed them — plus the
//         cost of each phase (look-up strategies, GET bandwidth, checks, publishing).
//   chat: conversations that resend their whole history each turn, closed loop (each sends its
//         next turn when the last answer is complete); throughput and hit rate, cache on vs off.
// Replicas are in-process (scheduler + batch executor each, as `troupe serve` runs them); Redis
// is a real redis-server (started here on a Unix socket unless --redis names one).
#include <CLI/CLI.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "runtime/prefix/redis_kv_store.hpp"
#include "runtime/prefix/remote_cache.hpp"
#include "runtime/serve/batch_executor.hpp"

extern char** environ;

using namespace troupe;
using clk = std::chrono::steady_clock;

namespace {

double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// A redis-server of our own on a Unix socket (no persistence), stopped with the bench.
struct own_redis {
  std::string dir;
  pid_t pid = -1;
  explicit own_redis(const std::string& maxmemory) {
    char tmpl[] = "/tmp/troupe-bench-redis-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
    dir = tmpl;
    std::vector<std::string> args = {"redis-server", "--port", "0", "--unixsocket", dir + "/redis.sock",
                                     "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                     "--dir", dir, "--logfile", dir + "/redis.log", "--maxmemory", maxmemory,
                                     "--maxmemory-policy", "volatile-lru"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid, "redis-server", nullptr, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start redis-server");
    for (int i = 0; i < 500 && !std::filesystem::exists(dir + "/redis.sock"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~own_redis() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st;
      ::waitpid(pid, &st, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string url() const { return "unix://" + dir + "/redis.sock"; }
};

struct options {
  std::string model, redis = "auto", maxmemory = "4gb";
  int prefix = 2048, suffix = 16, chunk = 512, block_size = 16;
  int fetch_budget_ms = 10000;
  int conversations = 6, turns = 4, system_tokens = 512, user_tokens = 32, output_tokens = 8;
  bool chat_without_cache = true;
};

sampling_params greedy() {
  sampling_params p;
  p.temperature = 0;
  p.ignore_eos = true;
  return p;
}

// One replica: what `troupe serve` runs per process, minus the actors. Publishing happens after
// the first token (the actor does it asynchronously, off the request's path).
struct replica {
  std::string name;
  sched::scheduler s;
  serve::batch_executor ex;
  prefix::cost_model cost;
  std::unique_ptr<prefix::redis_kv_store> fetch_store, publish_store;
  std::unique_ptr<prefix::remote_cache> fetcher, publisher;
  std::map<int64_t, std::shared_ptr<serve::seq_sampling>> samplers;
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, int32_t> cached;
  std::vector<prefix::saved_block> to_publish;
  std::vector<prefix::fetch_result> fetches;
  double fetch_budget_s = 10;
  int64_t batched_tokens = 0;

  replica(std::string n, std::shared_ptr<const checkpoint> ck, const sched::sched_config& cfg, int32_t blocks,
          int32_t bs, const std::string& redis_url, double budget_s, const prefix::cache_identity& id)
      : name(std::move(n)), s(cfg, blocks, bs), ex(ck, blocks, bs), fetch_budget_s(budget_s) {
    if (redis_url.empty()) return;
    prefix::redis_options ro;
    ro.url = prefix::parse_redis_url(redis_url);
    fetch_store = std::make_unique<prefix::redis_kv_store>(ro);
    publish_store = std::make_unique<prefix::redis_kv_store>(ro);
    prefix::block_codec codec(id.key_component(), ex.kv_layout());
    prefix::remote_options opts;
    opts.fetch_budget = std::chrono::milliseconds(static_cast<int64_t>(budget_s * 1000));
    fetcher = std::make_unique<prefix::remote_cache>(*fetch_store, codec, id, opts, cost);
    publisher = std::make_unique<prefix::remote_cache>(*publish_store, codec, id, opts, cost);
  }

  void add(int64_t id, const std::vector<int32_t>& prompt, int32_t max_tokens) {
    sched::request_spec spec;
    spec.seq_id = id;
    spec.prompt = prompt;
    spec.max_tokens = max_tokens;
    auto a = s.add(spec);
    if (a.status != sched::admit_status::ok) throw std::runtime_error(a.message);
    samplers[id] = std::make_shared<serve::seq_sampling>(greedy(), prompt);
  }

  // One scheduler iteration: resolve look-ups, plan, run, update. Returns the finished ids.
  std::vector<int64_t> step() {
    for (auto& q : s.take_remote_lookups()) {
      prefix::remote_blocks found;
      if (fetcher) {
        auto r = fetcher->fetch(q, prefix::store_clock::now() + std::chrono::duration_cast<clk::duration>(
                                                                       std::chrono::duration<double>(fetch_budget_s)));
        found = r.blocks;
        fetches.push_back(std::move(r));
      }
      s.resolve_remote(q.seq_id, std::move(found));
    }
    serve::step_job job;
    job.plan = s.schedule();
    for (const auto& e : job.plan.seqs) {
      if (e.first_scheduled) cached[e.seq_id] = e.num_cached_tokens;
      if (e.sample) job.samplers.push_back(samplers.at(e.seq_id));
    }
    std::vector<int64_t> finished;
    if (job.plan.empty()) return finished;
    batched_tokens += job.plan.num_batched_tokens;
    auto outcome = ex.run(job);
    if (!outcome.step_error.empty()) throw std::runtime_error(outcome.step_error);
    if (job.plan.num_batched_tokens >= 16) cost.observe_prefill(job.plan.num_batched_tokens, outcome.engine_seconds);
    for (auto& b : outcome.saved) to_publish.push_back(std::move(b));
    for (const auto& ev : s.update(job.plan, outcome.sampled)) {
      out[ev.seq_id].insert(out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) finished.push_back(ev.seq_id);
    }
    return finished;
  }

  // Seconds from add() to the first sampled token of `id`.
  double ttft(int64_t id, const std::vector<int32_t>& prompt, int32_t max_tokens) {
    auto t0 = clk::now();
    add(id, prompt, max_tokens);
    while (out[id].empty()) step();
    double t = since(t0);
    while (!s.idle()) step();
    return t;
  }

  // Writes what the finished steps filled (what the publisher actor does in the background).
  std::pair<size_t, double> publish() {
    if (!publisher || to_publish.empty()) return {0, 0.0};
    auto t0 = clk::now();
    size_t written = 0;
    const size_t batch = 16;
    for (size_t i = 0; i < to_publish.size(); i += batch) {
      auto n = std::min(batch, to_publish.size() - i);
      written += publisher->publish(std::span(to_publish).subspan(i, n), prefix::store_clock::now() + std::chrono::seconds(30));
    }
    to_publish.clear();
    return {written, since(t0)};
  }
};

std::shared_ptr<const checkpoint> open_model(const std::string& dir_opt) {
  std::string dir = dir_opt;
  if (dir.empty()) {
    dir = "/dev/shm/troupe-bench-qwen3-0.6b";
    if (!std::filesystem::exists(dir + "/config.json")) {
      std::printf("making a random Qwen3-0.6B-shaped checkpoint in %s ...\n", dir.c_str());
      random_checkpoint_options o;
      o.seed = 1;
      write_random_checkpoint(dir, preset_config("qwen3-0.6b"), qwen3_generation_defaults(), o);
    }
  }
  auto t0 = clk::now();
  auto ck = load_checkpoint(dir);
  std::printf("model %s loaded in %.2f s\n", dir.c_str(), since(t0));
  return ck;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min<int64_t>(vocab, 150000)));
  return t;
}

sched::sched_config sched_cfg(const options& o, bool prefix_on, bool remote, const std::string& fp, int max_len) {
  sched::sched_config c;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = o.chunk;
  c.max_model_len = max_len;
  c.enable_prefix_caching = prefix_on;
  c.prefix_identity.model_fingerprint = fp;
  c.prefix_options.remote = remote;
  return c;
}

int run_ttft(const options& o) {
  auto ck = open_model(o.model);
  const std::string fp = model_fingerprint(*ck);
  std::unique_ptr<own_redis> redis;
  std::string url = o.redis;
  if (url == "auto") {
    redis = std::make_unique<own_redis>(o.maxmemory);
    url = redis->url();
  }
  std::printf("fingerprint %s\nredis %s\n", fp.c_str(), url.c_str());
  prefix::cache_identity id;
  id.model_fingerprint = fp;
  id.block_size = o.block_size;

  std::mt19937 rng(42);
  auto shared = random_tokens(rng, o.prefix, ck->config.vocab_size);
  auto p1 = shared, p2 = shared;
  auto s1 = random_tokens(rng, o.suffix, ck->config.vocab_size), s2 = random_tokens(rng, o.suffix, ck->config.vocab_size);
  p1.insert(p1.end(), s1.begin(), s1.end());
  p2.insert(p2.end(), s2.begin(), s2.end());
  const int max_len = o.prefix + o.suffix + 8;
  const int32_t blocks = 2 * ((max_len + o.block_size - 1) / o.block_size) + 4;
  const int out_tokens = 4;

  replica a("A", ck, sched_cfg(o, true, true, fp, max_len), blocks, o.block_size, url, o.fetch_budget_ms / 1000.0, id);
  // Warm-up on unrelated tokens: weight pages, thread pools and scratch, so "cold" means a cold
  // cache, not a cold process.
  auto warm = random_tokens(rng, std::min(o.chunk, o.prefix), ck->config.vocab_size);
  a.ttft(100, warm, 2);
  a.to_publish.clear();
  double cold = a.ttft(1, p1, out_tokens);
  auto [written, publish_s] = a.publish();
  double local = a.ttft(2, p2, out_tokens);
  const double kv_mb = static_cast<double>(a.ex.kv_layout().payload_bytes()) * (o.prefix / o.block_size) / 1e6;
  std::printf("\nprompt %d tokens (%d shared + %d), chunk %d, block %d; KV of the shared part %.1f MB\n",
              o.prefix + o.suffix, o.prefix, o.suffix, o.chunk, o.block_size, kv_mb);
  std::printf("replica A cold       TTFT %8.3f s\n", cold);
  std::printf("replica A published  %zu blocks in %.3f s (%.0f MB/s), after the answer\n", written, publish_s,
              written * static_cast<double>(a.publisher->codec().encoded_bytes()) / 1e6 / std::max(publish_s, 1e-9));
  std::printf("replica A local hit  TTFT %8.3f s  = %5.1f%% of cold (cached %d tokens)\n", local, 100 * local / cold,
              a.cached[2]);

  replica b("B", ck, sched_cfg(o, true, true, fp, max_len), blocks, o.block_size, url, o.fetch_budget_ms / 1000.0, id);
  b.ttft(100, warm, 2);  // its look-up finds nothing: that prompt was never published
  b.fetches.clear();
  double remote = b.ttft(2, p2, out_tokens);
  const auto& f = b.fetches.at(0);
  std::printf("replica B from Redis TTFT %8.3f s  = %5.1f%% of cold (cached %d tokens, decision %s)\n", remote,
              100 * remote / cold, b.cached[2], std::string(prefix::to_string(f.decision)).c_str());
  std::printf("    look-up (pipelined EXISTS x%zu) %.4f s; GET + checks %.3f s for %.1f MB = %.0f MB/s; estimated fetch %.3f s vs recompute %.3f s\n",
              f.num_found, f.lookup_s, f.read_s, f.bytes_read / 1e6, f.bytes_read / 1e6 / std::max(f.read_s, 1e-9),
              f.plan.fetch_s, f.plan.recompute_s);
  const bool same = b.out[2] == a.out[2];
  std::printf("    B's %d tokens equal A's: %s\n", out_tokens, same ? "yes" : "NO");

  // Look-up strategies on the same 128-key chain (timing only: a cost model that never fetches).
  {
    prefix::redis_options ro;
    ro.url = prefix::parse_redis_url(url);
    prefix::redis_kv_store st(ro);
    prefix::block_codec codec(id.key_component(), a.ex.kv_layout());
    prefix::cost_options co;
    co.prior_prefill_tokens_per_s = 1e12;  // recomputing is "free": stop after the look-up
    prefix::cost_model never(co);
    std::vector<prefix::block_hash> hashes;
    prefix::extend_block_hashes(hashes, prefix::root_hash(id), p2, o.block_size);
    prefix::remote_lookup q;
    prefix::block_hash parent = prefix::root_hash(id);
    for (size_t b2 = 0; b2 < hashes.size(); ++b2) {
      q.blocks.push_back({hashes[b2], parent, std::vector<int32_t>(p2.begin() + static_cast<long>(b2 * o.block_size),
                                                                     p2.begin() + static_cast<long>((b2 + 1) * o.block_size))});
      parent = hashes[b2];
    }
    for (auto strat : {prefix::lookup_strategy::pipelined, prefix::lookup_strategy::binary_search}) {
      prefix::remote_options ropt;
      ropt.strategy = strat;
      prefix::remote_cache rc(st, codec, id, ropt, never);
      double best = 1e9;
      size_t found = 0;
      for (int i = 0; i < 20; ++i) {
        auto r = rc.fetch(q, prefix::store_clock::now() + std::chrono::seconds(5));
        best = std::min(best, r.lookup_s);
        found = r.num_found;
      }
      std::printf("look-up %-13s over %zu keys: %zu found, best of 20 %.3f ms\n",
                  strat == prefix::lookup_strategy::pipelined ? "pipelined" : "binary search", q.blocks.size(), found,
                  best * 1e3);
    }
  }
  std::printf("peak RSS %.0f MB\n", peak_rss_mb());
  return same ? 0 : 1;
}

struct chat_result {
  double seconds = 0;
  int64_t output_tokens = 0, requests = 0, prefill_tokens = 0;
  prefix::prefix_stats stats;
  std::map<int64_t, std::vector<int32_t>> out;
};

chat_result run_chat_once(const options& o, std::shared_ptr<const checkpoint> ck, const std::string& fp, bool cache) {
  std::mt19937 rng(7);
  const int64_t vocab = ck->config.vocab_size;
  auto system = random_tokens(rng, o.system_tokens, vocab);
  std::vector<std::vector<int32_t>> user(static_cast<size_t>(o.conversations * o.turns));
  for (auto& u : user) u = random_tokens(rng, o.user_tokens, vocab);
  const int max_len = o.system_tokens + o.turns * (o.user_tokens + o.output_tokens) + 16;
  // Room for every conversation's whole history at once, plus a margin of cached blocks.
  const int32_t blocks = static_cast<int32_t>(o.conversations) * ((max_len + o.block_size - 1) / o.block_size) + 64;
  prefix::cache_identity id;
  id.model_fingerprint = fp;
  replica r(cache ? "on" : "off", ck, sched_cfg(o, cache, false, fp, max_len), blocks, o.block_size, "", 1.0, id);

  std::vector<std::vector<int32_t>> history(static_cast<size_t>(o.conversations), system);
  std::vector<int> turn(static_cast<size_t>(o.conversations), 0);
  std::map<int64_t, int> conv_of;
  auto submit = [&](int c) {
    auto& h = history[static_cast<size_t>(c)];
    const auto& u = user[static_cast<size_t>(c * o.turns + turn[static_cast<size_t>(c)])];
    h.insert(h.end(), u.begin(), u.end());
    int64_t id2 = c * 1000 + turn[static_cast<size_t>(c)];
    conv_of[id2] = c;
    r.add(id2, h, o.output_tokens);
  };
  chat_result res;
  auto t0 = clk::now();
  for (int c = 0; c < o.conversations; ++c) submit(c);
  while (!r.s.idle()) {
    for (int64_t done : r.step()) {
      int c = conv_of.at(done);
      auto& h = history[static_cast<size_t>(c)];
      const auto& answer = r.out[done];
      h.insert(h.end(), answer.begin(), answer.end());
      ++res.requests;
      res.output_tokens += static_cast<int64_t>(answer.size());
      if (++turn[static_cast<size_t>(c)] < o.turns) submit(c);
    }
  }
  res.seconds = since(t0);
  res.prefill_tokens = r.batched_tokens - res.output_tokens;
  if (cache) res.stats = r.s.prefix_cache()->stats();
  res.out = r.out;
  return res;
}

int run_chat(const options& o) {
  auto ck = open_model(o.model);
  const std::string fp = model_fingerprint(*ck);
  std::printf("\nchat: %d conversations x %d turns; system prompt %d tokens, %d new user tokens and %d answer tokens per turn; chunk %d\n",
              o.conversations, o.turns, o.system_tokens, o.user_tokens, o.output_tokens, o.chunk);
  auto on = run_chat_once(o, ck, fp, true);
  std::printf("cache on : %7.2f s, %lld requests, %lld output tokens, %lld tokens computed -> %.2f output tok/s, %.3f req/s; hit rate %.1f%% (%lld of %lld prompt tokens)\n",
              on.seconds, (long long)on.requests, (long long)on.output_tokens, (long long)(on.prefill_tokens + on.output_tokens),
              on.output_tokens / on.seconds, on.requests / on.seconds,
              100.0 * on.stats.hit_tokens / std::max<int64_t>(1, on.stats.query_tokens), (long long)on.stats.hit_tokens,
              (long long)on.stats.query_tokens);
  if (!o.chat_without_cache) return 0;
  auto off = run_chat_once(o, ck, fp, false);
  std::printf("cache off: %7.2f s, %lld requests, %lld output tokens, %lld tokens computed -> %.2f output tok/s, %.3f req/s\n",
              off.seconds, (long long)off.requests, (long long)off.output_tokens,
              (long long)(off.prefill_tokens + off.output_tokens), off.output_tokens / off.seconds, off.requests / off.seconds);
  const bool same = on.out == off.out;
  std::printf("throughput with the cache / without: %.2fx; outputs identical: %s\n", off.seconds / on.seconds,
              same ? "yes" : "NO");
  std::printf("peak RSS %.0f MB\n", peak_rss_mb());
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-bench-prefix: prefix caching, local and through Redis"};
  options o;
  app.require_subcommand(1);
  auto* ttft = app.add_subcommand("ttft", "time to first token: cold, local hit, from Redis via another replica");
  auto* chat = app.add_subcommand("chat", "multi-turn chat workload, throughput with and without the cache");
  for (auto* c : {ttft, chat}) {
    c->add_option("--model", o.model, "checkpoint directory (default: a random Qwen3-0.6B-shaped one in /dev/shm)");
    c->add_option("--chunk", o.chunk, "max tokens per step (max_num_batched_tokens)");
  }
  ttft->add_option("--prefix", o.prefix, "shared (cached) tokens");
  ttft->add_option("--suffix", o.suffix, "new tokens after the shared part");
  ttft->add_option("--redis", o.redis, "redis URL, or auto: a private redis-server on a Unix socket");
  ttft->add_option("--maxmemory", o.maxmemory, "maxmemory of the auto redis-server");
  ttft->add_option("--fetch-budget-ms", o.fetch_budget_ms, "longest a request may wait for Redis");
  chat->add_option("--conversations", o.conversations);
  chat->add_option("--turns", o.turns);
  chat->add_option("--system-tokens", o.system_tokens);
  chat->add_option("--user-tokens", o.user_tokens);
  chat->add_option("--output-tokens", o.output_tokens);
  chat->add_flag("!--only-cached", o.chat_without_cache, "skip the cache-off run");
  CLI11_PARSE(app, argc, argv);
  try {
    if (ttft->parsed()) return run_ttft(o);
    return run_chat(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-bench-prefix: %s\n", e.what());
    return 1;
  }
}
