// End to end: `troupe serve` with model.tensor_parallel_size 2, the shard executor's step split
// over two CPU shards (and model.pipeline_parallel_size 2: over two stages, of one or two shards). Concurrent streams, greedy and seeded, get exactly the tokens the generator
// gives the same request alone over two ranks (what `troupe generate --tensor-parallel-size 2`
// prints; with --enable-expert-parallel for a MoE model, whole experts per shard), also when the prefix cache hands them blocks and when a tiny pool forces preemption;
// every block comes back; LoRA adapters are served over the group; a model the group cannot split
// stops the start, as does one without lm_head.
#include "tests/actors/e2e_fixture.hpp"
#include <unistd.h>

#include <boost/test/data/test_case.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/sampling/logprobs.hpp"
#include "tests/actors/http_client.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

const std::string tiny_moe_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-moe";

void check_served_over_two_ranks(const std::string& model, uint32_t seed, bool expert_parallel = false, int32_t size = 2,
                                 int32_t stages = 1) {
  auto c = test_config();
  c.tensor_parallel_size = size;
  c.enable_expert_parallel = expert_parallel;
  c.pipeline_parallel_size = stages;
  c.pipeline_schedule = expert_parallel ? "wavefront" : "auto";  // auto: in turn on one NUMA node
  c.threads = size * stages;  // one each
  parallel_config group{size, expert_parallel};
  group.pipeline_size = stages;
  group.schedule = parse_pipeline_schedule(c.pipeline_schedule, "test");
  auto srv = start(c, model);
  BOOST_TEST(srv->banner().find("step threads: " + std::to_string(size * stages) + ";") != std::string::npos, srv->banner());
  if (size > 1)
    BOOST_TEST(srv->banner().find("tensor parallel: " + std::to_string(size) + " CPU shards") != std::string::npos, srv->banner());
  if (stages > 1) {
    const bool wave = resolved_schedule(group) == pipeline_schedule::wavefront;
    BOOST_TEST(srv->banner().find(std::string("pipeline parallel: 2 stages of 1,1 layers, each with its layers' KV; ") +
                                  (wave ? "a wavefront" : "in turn")) != std::string::npos,
               srv->banner());
  }
  if (expert_parallel)
    BOOST_TEST(srv->banner().find("expert parallel: each holds 4 of the 8 experts whole") != std::string::npos, srv->banner());
  if (size == 4)
    BOOST_TEST(srv->banner().find("KV heads: 2, each replicated on 2 shards") != std::string::npos, srv->banner());
  auto ck = load_checkpoint(model);
  std::mt19937 rng(seed);
  std::vector<int32_t> shared(40);  // two and a half blocks: later requests reuse earlier ones' blocks
  for (auto& t : shared) t = static_cast<int32_t>(rng() % 4000);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 8; ++i) {
    auto p = i % 2 ? shared : random_prompt(rng, 30);
    auto tail = random_prompt(rng, 20);
    p.insert(p.end(), tail.begin(), tail.end());
    reqs.push_back(ids_request("tp" + std::to_string(i), p, 6 + static_cast<int32_t>(rng() % 10), i % 3 ? 300 + i : -1));
  }
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    BOOST_TEST(got[i] == reference(*ck, reqs[i], nullptr, group), boost::test_tools::per_element());
  const int64_t cached =
      complete_again(cl, reqs, [&](const wire::generate_request& r) { return reference(*ck, r, nullptr, group); });
  BOOST_TEST(cached > 0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_tensor_parallel)

BOOST_AUTO_TEST_CASE(two_shards_serve_what_the_generator_gives_over_two_ranks) {
  check_served_over_two_ranks(tiny_dense_dir, 21);
}

BOOST_AUTO_TEST_CASE(two_shards_serve_a_moe_model) { check_served_over_two_ranks(tiny_moe_dir, 22); }

// model.pipeline_parallel_size 2: each layer on its own stage, the streams the generator's over the
// same stages (which are one runner's bits), prefix-cache hits included; and with two shards in
// each stage, a MoE model's experts whole.
BOOST_AUTO_TEST_CASE(two_pipeline_stages_serve_what_the_generator_gives) {
  check_served_over_two_ranks(tiny_dense_dir, 27, false, 1, 2);
}

BOOST_AUTO_TEST_CASE(two_stages_of_two_shards_serve_a_moe_model_expert_parallel) {
  check_served_over_two_ranks(tiny_moe_dir, 28, true, 2, 2);
}

// Four shards over the model's 2 KV heads: each head on two shards (shard.hpp), the streams those
// of the generator over the same group, prefix-cache hits included.
BOOST_AUTO_TEST_CASE(four_shards_replicate_the_kv_heads) { check_served_over_two_ranks(tiny_dense_dir, 26, false, 4); }

// model.enable_expert_parallel: whole experts per shard, the streams those of the generator over
// the same layout (sliced experts' differ in the last bits, which seeded sampling would show).
BOOST_AUTO_TEST_CASE(two_shards_serve_a_moe_model_expert_parallel) {
  check_served_over_two_ranks(tiny_moe_dir, 23, true);
}

// The served arithmetic is the group's, bit for bit: a prompt's logprobs equal those of the
// generator's logits over two ranks exactly (one rank's differ in the last bits).
BOOST_AUTO_TEST_CASE(prompt_logprobs_are_the_two_rank_logits_exactly) {
  auto c = test_config();
  c.tensor_parallel_size = 2;
  c.enable_prefix_caching = false;
  auto srv = start(c);
  std::mt19937 rng(24);
  std::vector<int32_t> prompt(40);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 4000);
  auto r = ids_request("lp", prompt, 2);
  r.prompt_logprobs = 1;
  client::client cl("127.0.0.1", srv->port());
  const auto got = cl.complete(r);
  BOOST_TEST_REQUIRE(got.done.prompt_logprobs.has_value());
  BOOST_TEST_REQUIRE(got.done.prompt_logprobs->size() == prompt.size() - 1);
  const int64_t vocab = tiny_dense().config.vocab_size;
  const auto two = generator(tiny_dense(), 2).prompt_logits(prompt);
  const auto one = generator(tiny_dense(), 1).prompt_logits(prompt);
  int differ_from_one = 0;
  for (size_t i = 1; i < prompt.size(); ++i) {
    const auto& served = (*got.done.prompt_logprobs)[i - 1];
    auto row = [&](const std::vector<float>& l) { return std::span<const float>(l.data() + (i - 1) * vocab, vocab); };
    const auto want = logprobs_of(row(two), prompt[i], 1);
    BOOST_TEST(served.logprob == want.logprob, "position " << i);
    BOOST_TEST((served.top == want.top), "position " << i);
    differ_from_one += served.logprob != logprobs_of(row(one), prompt[i], 1).logprob;
  }
  BOOST_TEST_MESSAGE(differ_from_one << " of " << prompt.size() - 1 << " logprobs differ from one rank's");
  BOOST_TEST(differ_from_one > 0);  // else this test could not tell the group from one rank
}

BOOST_DATA_TEST_CASE(a_tiny_pool_preempts_over_two_shards_or_stages_and_every_output_is_right,
                     boost::unit_test::data::make({1, 2}), stages) {
  auto c = test_config();
  c.tensor_parallel_size = 3 - stages;  // two shards, or two stages of one
  c.pipeline_parallel_size = stages;
  c.max_model_len = 64;
  c.num_kv_blocks = 4;
  auto srv = start(c);
  std::mt19937 rng(23);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 8; ++i)
    reqs.push_back(ids_request("pp" + std::to_string(i), random_prompt(rng, 30), 6 + static_cast<int32_t>(rng() % 12),
                               i % 2 ? 400 + i : -1));
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    BOOST_TEST(got[i] == reference(tiny_dense(), reqs[i], nullptr, 3 - stages), boost::test_tools::per_element());
  BOOST_TEST(metric(*srv, "num_preemptions_total") > 0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(a_model_the_group_cannot_split_stops_the_start) {
  auto expect = [](serve::server_config c, const std::string& needle) {
    try {
      start(c);
      BOOST_ERROR("started with tensor_parallel_size " << c.tensor_parallel_size);
    } catch (const troupe::error& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  auto c = test_config();
  c.tensor_parallel_size = 3;
  expect(c, "tensor_parallel_size 3: num_attention_heads (4) is not a multiple of it");
  c.tensor_parallel_size = 2;
  c.threads = 1;
  expect(c, "threads (1) is fewer than tensor_parallel_size (2); each shard needs a thread of its own");
  c.tensor_parallel_size = 1;
  c.pipeline_parallel_size = 3;
  c.threads = 0;
  expect(c, "pipeline_parallel_size 3 is more than the model's 2 layers (num_hidden_layers)");
  c.pipeline_parallel_size = 2;
  c.pipeline_layers = "2,1";
  expect(c, "pipeline_layers adds up to 3 layers; the model has 2");
  c.pipeline_layers = "1,x";
  expect(c, "model.pipeline_layers (--pipeline-layers): '1,x' is not a comma-separated list");
  c.pipeline_layers.clear();
  c.tensor_parallel_size = 2;
  c.threads = 3;
  expect(c, "threads (3) is fewer than pipeline_parallel_size x tensor_parallel_size (4)");
}

// LoRA adapters over two shards: concurrent requests for either adapter and for the base model
// get exactly what `troupe generate --lora DIR --tensor-parallel-size 2` gives each alone.
BOOST_AUTO_TEST_CASE(lora_adapters_are_served_over_two_shards) {
  const std::string peft_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense-lora/adapter";
  const std::string rs_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense-lora-rs/adapter";
  auto c = test_config();
  c.tensor_parallel_size = 2;
  c.lora_modules = "peft=" + peft_dir + ",rs=" + rs_dir;
  auto srv = start(c);
  const auto peft = std::make_shared<const lora_adapter>(load_lora_adapter(peft_dir, tiny_dense().config));
  const auto rs = std::make_shared<const lora_adapter>(load_lora_adapter(rs_dir, tiny_dense().config));
  std::mt19937 rng(25);
  std::vector<wire::generate_request> reqs;
  const char* adapters[] = {"", "peft", "rs"};
  for (int i = 0; i < 9; ++i) {
    auto r = ids_request("l" + std::to_string(i), random_prompt(rng, 40), 10, i % 2 ? 500 + i : -1);
    r.adapter = adapters[i % 3];
    reqs.push_back(std::move(r));
  }
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& a = reqs[i].adapter == "peft" ? peft : reqs[i].adapter == "rs" ? rs : nullptr;
    BOOST_TEST(got[i] == reference(tiny_dense(), reqs[i], a, 2), boost::test_tools::per_element());
  }
  BOOST_TEST((got[1] != reference(tiny_dense(), reqs[1], nullptr, 2)));  // the adapter made them
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// A bare Qwen3Model export with untied embeddings and no lm_head (Qwen3-Embedding-8B's layout)
// is served for embeddings only, on one shard or two: each embedding is troupe embed's (the
// generator's) bit for bit; generation and chat, over msgpack or HTTP, are refused naming why.
BOOST_AUTO_TEST_CASE(a_model_without_lm_head_serves_embeddings_only) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("troupe-headless-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto config = nlohmann::json::parse(std::ifstream(tiny_dense_dir + "/config.json"));
  config["tie_word_embeddings"] = false;
  std::ofstream(dir / "config.json") << config.dump();
  {
    safetensors_file in(tiny_dense_dir + "/model.safetensors");
    std::vector<tensor_to_write> ts;
    for (const auto& t : in.tensors())
      ts.push_back({t.name.rfind("model.", 0) == 0 ? t.name.substr(6) : t.name, t.type, t.shape, t.data, {}});
    write_safetensors((dir / "model.safetensors").string(), ts);
  }
  const auto ck = load_checkpoint(dir.string());
  BOOST_REQUIRE(ck->no_lm_head);
  for (int32_t shards : {1, 2}) {
    BOOST_TEST_CONTEXT(shards << " shard(s)") {
      auto c = test_config();
      c.tensor_parallel_size = shards;
      auto srv = start(c, dir.string());
      BOOST_TEST(srv->model().embedding_only);
      BOOST_TEST(srv->banner().find("EMBEDDINGS ONLY") != std::string::npos, srv->banner());
      client::client cl("127.0.0.1", srv->port());
      wire::generate_request e;
      e.id = "e";
      e.embed.emplace();
      e.embed->ids = {{5, 17, 300, 2}, {9, 9}};
      const auto got = cl.embed(e);
      BOOST_REQUIRE_EQUAL(got.size(), 2u);
      generator g(*ck, shards);
      for (size_t i = 0; i < got.size(); ++i)
        BOOST_TEST(got[i] == g.embed(e.embed->ids[i], embedding_options{}), boost::test_tools::per_element());
      try {
        cl.complete(ids_request("g", {5, 17}, 4));
        BOOST_ERROR("an embedding model generated");
      } catch (const client::request_error& err) {
        BOOST_TEST((err.error().code == wire::error_code::unsupported));
        BOOST_TEST(err.error().message.find("is an embedding model (its checkpoint has no lm_head.weight)") !=
                       std::string::npos,
                   err.error().message);
      }
      http_client h(srv->http_port());
      const std::string body = R"({"prompt": [5, 17], "max_tokens": 2})";
      h.send("POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
      const auto r = h.read();
      BOOST_TEST(r.status == 400);
      BOOST_TEST(r.body.find("embedding model") != std::string::npos, r.body);
      BOOST_TEST(eventually([&] { return server_idle(*srv); }));
    }
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
