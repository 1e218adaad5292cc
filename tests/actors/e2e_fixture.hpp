// End-to-end test helpers: an in-process `troupe serve` on a free loopback port, requests, and
// the single-request reference (the generator `troupe generate` runs).
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "actors/server.hpp"
#include "examples/cpp/troupe_client.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"

namespace troupe::e2e {

inline const std::string tiny_dense_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense";
// A random-weight model with Qwen3's whole vocabulary, served with the real Qwen3 tokenizer: the
// text, chat and OpenAI-API tests' model.
inline const std::string full_vocab_dir = TROUPE_TEST_DATA_DIR "/golden/e2e-full-vocab";
inline const std::string tokenizer_dir = TROUPE_SOURCE_DIR "/models/qwen3-tokenizer";

inline serve::server_config test_config() {
  serve::server_config c;
  c.port = 0;
  c.metrics_port = 0;
  c.http_port = 0;
  c.num_kv_blocks = 512;
  c.max_model_len = 256;
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 256;
  c.shutdown_grace_ms = 0;
  c.log_stats_interval_ms = 0;  // quiet test output (e2e_lifecycle checks the stats line)
  return c;
}

inline std::unique_ptr<actors::server> start(serve::server_config c, const std::string& model = tiny_dense_dir,
                                             const std::string& tokenizer = "") {
  actors::server_options o;
  o.cfg = c;
  o.model_dir = model;
  o.tokenizer_dir = tokenizer;
  return std::make_unique<actors::server>(o);
}

inline const checkpoint& tiny_dense() {
  static auto ck = load_checkpoint(tiny_dense_dir);
  return *ck;
}

// A generate request over prompt ids; seeded sampling when seed >= 0, else greedy.
inline wire::generate_request ids_request(std::string id, std::vector<int32_t> prompt, int32_t max_tokens,
                                          int64_t seed = -1, double temperature = 0.8) {
  wire::generate_request r;
  r.id = std::move(id);
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  if (seed >= 0) {
    r.sampling.temperature = temperature;
    r.sampling.seed = static_cast<uint64_t>(seed);
  } else {
    r.sampling.temperature = 0.0;
  }
  return r;
}

// What `troupe generate --ids ... --max-tokens N [--temperature T --seed S] --ignore-eos [--lora DIR]
// --tensor-parallel-size N [--enable-expert-parallel]]` prints: the same parameter derivation as
// tools/troupe/cmd_generate.cpp.
inline std::vector<int32_t> reference(const checkpoint& ck, const wire::generate_request& r,
                                      std::shared_ptr<const lora_adapter> adapter = nullptr,
                                      parallel_config parallel = {}) {
  generate_options o;
  o.max_tokens = *r.max_tokens;
  o.sampling = defaults_from(ck.generation);
  if (r.sampling.temperature) o.sampling.temperature = static_cast<float>(*r.sampling.temperature);
  if (r.sampling.seed) {
    o.sampling.seed = *r.sampling.seed;
    o.sampling.has_seed = true;
  }
  o.sampling.ignore_eos = r.ignore_eos;
  o.adapter = std::move(adapter);
  generator g(ck, parallel);
  return g.generate(r.prompt_ids, o).ids;
}

// Sends every request on one connection before reading any (so they share the server's steps),
// then each stream's ids in request order.
inline std::vector<std::vector<int32_t>> stream_all(client::client& cl, const std::vector<wire::generate_request>& reqs) {
  std::vector<client::stream> streams;
  for (const auto& r : reqs) streams.push_back(cl.generate(r));
  std::vector<std::vector<int32_t>> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    while (auto ev = streams[i].next()) out[i].insert(out[i].end(), ev->ids.begin(), ev->ids.end());
  return out;
}

// Each request again, one at a time (their prompts' blocks now come from the prefix cache), each
// answer checked against want(request); returns the cached prompt tokens the server reported.
template <class Want>
int64_t complete_again(client::client& cl, const std::vector<wire::generate_request>& reqs, Want&& want) {
  int64_t cached = 0;
  for (const auto& r : reqs) {
    auto again = r;
    again.id += "-again";
    auto out = cl.complete(again);
    cached += out.done.usage.cached_prompt_tokens;
    BOOST_TEST(out.ids == want(r), boost::test_tools::per_element());
  }
  return cached;
}

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int max_len, int vocab = 4000) {
  std::vector<int32_t> p(1 + rng() % static_cast<unsigned>(max_len));
  for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
  return p;
}

// Polls `pred` for up to `timeout`.
template <class F>
bool eventually(F pred, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Reads `name{...} value` from the Prometheus text.
inline double metric(actors::server& s, const std::string& name) {
  auto text = s.metrics().render();
  auto pos = text.find("\ntroupe:" + name + "{");
  if (pos == std::string::npos) return -1;
  auto sp = text.find("} ", pos);
  return std::stod(text.substr(sp + 2, text.find('\n', sp) - sp - 2));
}

// Every KV block back in the pool and nothing queued.
inline bool server_idle(actors::server& s) {
  return metric(s, "num_requests_running") == 0 && metric(s, "num_requests_waiting") == 0 &&
         metric(s, "kv_cache_usage_perc") == 0;
}

}  // namespace troupe::e2e
