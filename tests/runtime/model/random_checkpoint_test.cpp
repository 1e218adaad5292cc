// make-checkpoint's library side: presets round-trip through load_checkpoint, weights are a
// deterministic function of the seed with the intended spread, and writing is atomic.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using troupe::test::expect_error;
namespace fs = std::filesystem;

namespace {

random_checkpoint_options options(uint64_t seed = 0, dtype type = dtype::bf16) {
  random_checkpoint_options o;
  o.seed = seed;
  o.weight_type = type;
  o.tokenizer_dir = test::tokenizer_dir();
  return o;
}

float element(const kernels::weight_ref& w, int64_t i) {
  if (w.type == dtype::f32) {
    float f;
    std::memcpy(&f, static_cast<const uint8_t*>(w.data) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(w.data) + 2 * i, 2);
  return w.type == dtype::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Mean and standard deviation of a weight's first n elements.
std::pair<double, double> moments(const kernels::weight_ref& w, int64_t n) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = element(w, i);
    s += v;
    s2 += v * v;
  }
  double mean = s / static_cast<double>(n);
  return {mean, std::sqrt(s2 / static_cast<double>(n) - mean * mean)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_checkpoint)

BOOST_AUTO_TEST_CASE(normal_stream_statistics) {
  const int n = 1'000'000;
  double s = 0, s2 = 0, s4 = 0, mx = 0;
  const uint64_t key = random_tensor_key(0, "x");
  for (int i = 0; i < n; ++i) {
    double v = random_normal(key, static_cast<uint64_t>(i));
    s += v;
    s2 += v * v;
    s4 += v * v * v * v;
    mx = std::max(mx, std::fabs(v));
  }
  BOOST_TEST(std::fabs(s / n) < 0.005);
  BOOST_TEST(std::fabs(s2 / n - 1.0) < 0.01);
  BOOST_TEST(std::fabs(s4 / n - 2.7) < 0.03);  // kurtosis of a sum of 4 uniforms: 2.7 (normal: 3)
  BOOST_TEST(mx <= 3.4642);
  BOOST_TEST(random_tensor_key(0, "x") != random_tensor_key(1, "x"));
  BOOST_TEST(random_tensor_key(0, "x") != random_tensor_key(0, "y"));
  BOOST_TEST(random_normal(key, 7) == random_normal(key, 7));
}

BOOST_AUTO_TEST_CASE(presets) {
  model_config t = preset_config("tiny");
  BOOST_TEST((t.arch == architecture::qwen3));
  BOOST_TEST(t.vocab_size == 151936);
  BOOST_TEST(t.hidden_size == 64);
  BOOST_TEST(t.head_dim == 32);
  BOOST_TEST(t.intermediate_size == 160);
  BOOST_TEST(t.tie_word_embeddings);
  model_config q = preset_config("qwen3-0.6b");
  BOOST_TEST(q.hidden_size == 1024);
  BOOST_TEST(q.intermediate_size == 3072);
  BOOST_TEST(q.num_hidden_layers == 28);
  BOOST_TEST(q.num_attention_heads == 16);
  BOOST_TEST(q.num_key_value_heads == 8);
  BOOST_TEST(q.head_dim == 128);
  BOOST_TEST(q.rope_theta == 1e6);
  BOOST_TEST(q.bos_token_id == 151643);
  BOOST_TEST(q.eos_token_ids == std::vector<int32_t>{151645});
  model_config m = preset_config("qwen3-moe-tiny");
  BOOST_TEST((m.arch == architecture::qwen3_moe));
  BOOST_TEST(m.num_experts == 8);
  BOOST_TEST(m.num_experts_per_tok == 2);
  BOOST_TEST(m.moe_intermediate_size == 48);
  BOOST_TEST(m.norm_topk_prob);
  BOOST_TEST(!m.tie_word_embeddings);
  model_config a3b = preset_config("qwen3-30b-a3b");  // Qwen/Qwen3-30B-A3B's config.json
  BOOST_TEST((a3b.arch == architecture::qwen3_moe));
  BOOST_TEST(a3b.hidden_size == 2048);
  BOOST_TEST(a3b.num_hidden_layers == 48);
  BOOST_TEST(a3b.num_attention_heads == 32);
  BOOST_TEST(a3b.num_key_value_heads == 4);
  BOOST_TEST(a3b.head_dim == 128);
  BOOST_TEST(a3b.num_experts == 128);
  BOOST_TEST(a3b.num_experts_per_tok == 8);
  BOOST_TEST(a3b.moe_intermediate_size == 768);
  BOOST_TEST(a3b.norm_topk_prob);
  BOOST_TEST(!a3b.tie_word_embeddings);
  for (int64_t l = 0; l < a3b.num_hidden_layers; ++l) BOOST_TEST(a3b.layer_is_moe(l));
  expect_error([] { preset_config("huge"); }, errc::invalid_argument, {"'huge'", "qwen3-0.6b"});
}

BOOST_AUTO_TEST_CASE(tiny_round_trip) {
  test::temp_dir dir;
  const std::string out = dir.str("tiny");
  auto summary = write_random_checkpoint(out, preset_config("tiny"), qwen3_generation_defaults(), options(3));
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json"})
    BOOST_TEST(fs::exists(fs::path(out) / f), f);
  BOOST_TEST(test::read_file(fs::path(out) / "tokenizer.json") ==
             test::read_file(fs::path(test::tokenizer_dir()) / "tokenizer.json"));
  auto ck = load_checkpoint(out);
  BOOST_TEST(ck->config.vocab_size == 151936);
  BOOST_TEST(ck->config.torch_dtype == "bfloat16");
  BOOST_TEST(ck->weights.num_parameters == summary.num_parameters);
  BOOST_TEST(summary.weight_bytes == static_cast<uint64_t>(summary.num_parameters) * 2);
  BOOST_TEST(ck->generation.do_sample);
  BOOST_TEST(ck->generation.temperature == 0.6f);
  BOOST_TEST(ck->generation.top_p == 0.95f);
  BOOST_TEST(ck->generation.top_k == 20);
  BOOST_TEST(ck->generation.eos_token_ids == (std::vector<int32_t>{151645, 151643}));
  // The bytes are the documented function of (seed, name, index).
  const auto& q = ck->weights.layers[1].q_proj;
  const uint64_t key = random_tensor_key(3, "model.layers.1.self_attn.q_proj.weight");
  for (int64_t i : {0, 1, 1000, 128 * 64 - 1})
    BOOST_TEST(element(q, i) == bf16_to_f32(f32_to_bf16(0.02f * random_normal(key, static_cast<uint64_t>(i)))));
  auto [mean, sd] = moments(ck->weights.embed_tokens, 151936 * 64);
  BOOST_TEST(std::fabs(mean) < 2e-4);
  BOOST_TEST(std::fabs(sd - 0.02) < 2e-4);
  const auto& norm = ck->weights.layers[0].input_layernorm;
  double s = 0;
  for (float v : norm) s += v;
  BOOST_TEST(std::fabs(s / 64 - 1.0) < 0.05);
  BOOST_TEST(*std::min_element(norm.begin(), norm.end()) > 0.6f);
  // Nothing left beside the checkpoint.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += (e.path().filename() != "tiny") ? 1 : 0;
  BOOST_TEST(entries == 0);
}

BOOST_AUTO_TEST_CASE(moe_tiny_round_trip_in_every_dtype) {
  test::temp_dir dir;
  for (dtype type : {dtype::bf16, dtype::f16, dtype::f32}) {
    const std::string out = dir.str(std::string(to_string(type)));
    write_random_checkpoint(out, preset_config("qwen3-moe-tiny"), qwen3_generation_defaults(), options(0, type));
    auto ck = load_checkpoint(out);
    BOOST_TEST_CONTEXT(to_string(type)) {
      BOOST_TEST((ck->config.arch == architecture::qwen3_moe));
      BOOST_TEST(ck->weights.layers[1].experts.size() == 8u);
      BOOST_TEST((ck->weights.layers[1].experts[7].down_proj.type == type));
      BOOST_TEST((ck->weights.lm_head.type == type));
      BOOST_TEST(ck->weights.lm_head.data != ck->weights.embed_tokens.data);
      if (type == dtype::f32) {
        // Exactly the documented function, with no rounding to hide a different evaluation
        // (an FMA in a vectorised clone would change the norms' 1 + 0.1 z).
        int mismatches = 0;
        auto check_norm = [&](const std::string& name, const std::vector<float>& norm) {
          const uint64_t nk = random_tensor_key(0, name);
          for (size_t i = 0; i < norm.size(); ++i) mismatches += norm[i] != 1.0f + 0.1f * random_normal(nk, i);
        };
        for (int l = 0; l < 2; ++l) {  // 448 norm values: an FMA would round ~3% of them differently
          const auto& lw = ck->weights.layers[static_cast<size_t>(l)];
          const std::string p = "model.layers." + std::to_string(l) + ".";
          check_norm(p + "input_layernorm.weight", lw.input_layernorm);
          check_norm(p + "post_attention_layernorm.weight", lw.post_attention_layernorm);
          check_norm(p + "self_attn.q_norm.weight", lw.q_norm);
          check_norm(p + "self_attn.k_norm.weight", lw.k_norm);
        }
        check_norm("model.norm.weight", ck->weights.norm);
        BOOST_TEST(mismatches == 0);
        const auto& up = ck->weights.layers[0].experts[3].up_proj;
        const uint64_t uk = random_tensor_key(0, "model.layers.0.mlp.experts.3.up_proj.weight");
        for (int64_t i = 0; i < 48 * 64; ++i)
          mismatches += element(up, i) != 0.02f * random_normal(uk, static_cast<uint64_t>(i));
        BOOST_TEST(mismatches == 0);
      }
      auto [mean, sd] = moments(ck->weights.layers[0].experts[3].up_proj, 48 * 64);
      BOOST_TEST(std::fabs(sd - 0.02) < 0.002);
      BOOST_TEST(std::fabs(mean) < 0.002);
    }
  }
}

BOOST_AUTO_TEST_CASE(deterministic_in_the_seed) {
  test::temp_dir dir;
  const model_config c = preset_config("qwen3-moe-tiny");
  write_random_checkpoint(dir.str("a"), c, qwen3_generation_defaults(), options(7));
  write_random_checkpoint(dir.str("b"), c, qwen3_generation_defaults(), options(7));
  write_random_checkpoint(dir.str("c"), c, qwen3_generation_defaults(), options(8));
  const std::string a = test::read_file(dir.path() / "a" / "model.safetensors");
  BOOST_TEST((a == test::read_file(dir.path() / "b" / "model.safetensors")));
  BOOST_TEST((a != test::read_file(dir.path() / "c" / "model.safetensors")));
  std::string fa = model_fingerprint(*load_checkpoint(dir.str("a")));
  BOOST_TEST(fa == model_fingerprint(*load_checkpoint(dir.str("b"))));
  BOOST_TEST(fa != model_fingerprint(*load_checkpoint(dir.str("c"))));
}

BOOST_AUTO_TEST_CASE(atomic_and_careful_with_existing_directories) {
  test::temp_dir dir;
  const model_config c = preset_config("tiny");
  const auto gen = qwen3_generation_defaults();
  // An empty directory is filled; a non-empty one needs force; force only replaces checkpoints.
  fs::create_directories(dir.path() / "empty");
  write_random_checkpoint(dir.str("empty"), c, gen, options(1));
  BOOST_TEST(fs::exists(dir.path() / "empty" / "model.safetensors"));
  expect_error([&] { write_random_checkpoint(dir.str("empty"), c, gen, options(2)); }, errc::invalid_argument,
               {dir.str("empty"), "--force"});
  const std::string before = model_fingerprint(*load_checkpoint(dir.str("empty")));
  auto forced = options(2);
  forced.force = true;
  write_random_checkpoint(dir.str("empty") + "/", c, gen, forced);
  BOOST_TEST(model_fingerprint(*load_checkpoint(dir.str("empty"))) != before);  // seed 2 replaced seed 1
  fs::create_directories(dir.path() / "notes");
  test::write_file(dir.path() / "notes" / "todo.txt", "keep me");
  expect_error([&] { write_random_checkpoint(dir.str("notes"), c, gen, forced); }, errc::invalid_argument,
               {dir.str("notes"), "no config.json"});
  BOOST_TEST(test::read_file(dir.path() / "notes" / "todo.txt") == "keep me");
  // A failure midway (no tokenizer) leaves nothing behind.
  auto bad = options();
  bad.tokenizer_dir = dir.str("no-tokenizer");
  expect_error([&] { write_random_checkpoint(dir.str("x"), c, gen, bad); }, errc::invalid_argument,
               {"no-tokenizer", "tokenizer.json"});
  BOOST_TEST(!fs::exists(dir.path() / "x"));
  int stray = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    stray += e.path().filename().string().rfind(".", 0) == 0 ? 1 : 0;
  BOOST_TEST(stray == 0);
}

BOOST_AUTO_TEST_CASE(default_tokenizer_is_found) {
  BOOST_TEST(fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json"));
}

BOOST_AUTO_TEST_SUITE_END()
