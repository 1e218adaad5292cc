// load_checkpoint on the golden sets (shapes, dtypes, tying, sharding, MoE) and one test per kind
// of bad checkpoint, each built in a temporary directory and asserting code, file and tensor.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include <nlohmann/json.hpp>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using troupe::test::expect_error;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A small dense tied model: q [16, 16], k/v [8, 16], o [16, 16], MLP 24.
model_config small_config() {
  model_config c;
  c.vocab_size = 128;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = true;
  c.bos_token_id = 126;
  c.eos_token_ids = {127};
  return c;
}

// Writes a checkpoint of `c` (weights 0.25, norms 1.0, bf16) after `edit` changes the tensor list.
void write_small(const fs::path& dir, const model_config& c,
                 const std::function<void(std::vector<tensor_to_write>&)>& edit = {},
                 float value = 0.25f) {
  fs::create_directories(dir);
  test::write_file(dir / "config.json", to_config_json(c));
  std::vector<tensor_to_write> ts;
  for (const auto& t : expected_tensors(c)) {
    float v = t.is_norm() ? 1.0f : value;
    ts.push_back({t.name, dtype::bf16, t.shape, nullptr, [v](uint8_t* o, uint64_t, uint64_t n) {
                    uint16_t b = f32_to_bf16(v);
                    for (uint64_t i = 0; i < n; i += 2) std::memcpy(o + i, &b, 2);
                  }});
  }
  if (edit) edit(ts);
  write_safetensors((dir / "model.safetensors").string(), ts, {{"format", "pt"}});
}

tensor_to_write filled(const std::string& name, dtype type, std::vector<int64_t> shape) {
  return {name, type, std::move(shape), nullptr,
          [](uint8_t* o, uint64_t, uint64_t n) { std::memset(o, 0, n); }};
}

void erase_tensor(std::vector<tensor_to_write>& ts, const std::string& name) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& t) { return t.name == name; });
  BOOST_REQUIRE(it != ts.end());
  ts.erase(it);
}

tensor_to_write& find_tensor(std::vector<tensor_to_write>& ts, const std::string& name) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& t) { return t.name == name; });
  BOOST_REQUIRE(it != ts.end());
  return *it;
}

// Rewrites a safetensors file's header through `edit`, keeping its data section; the new header
// is padded to a multiple of 8 bytes, or to an odd length to misalign the data.
void rewrite_header(const fs::path& file, const std::function<void(json&)>& edit, bool odd = false) {
  std::string bytes = test::read_file(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  json h = json::parse(bytes.substr(8, n));
  edit(h);
  std::string text = h.dump();
  while (odd ? text.size() % 2 == 0 : text.size() % 8 != 0) text += ' ';
  test::write_file(file, test::raw_safetensors(text, bytes.substr(8 + n)));
}

void edit_json(const fs::path& file, const std::function<void(json&)>& edit) {
  json j = json::parse(test::read_file(file));
  edit(j);
  test::write_file(file, j.dump(2));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(golden_tiny_dense) {
  auto ck = load_checkpoint(test::golden("tiny-dense"));
  const model_weights& w = ck->weights;
  BOOST_TEST(ck->files.size() == 1u);
  BOOST_TEST(ck->config.head_dim == 32);
  BOOST_TEST((w.embed_tokens.type == dtype::bf16));
  BOOST_TEST(w.embed_tokens.rows == 4096);
  BOOST_TEST(w.embed_tokens.cols == 64);
  BOOST_TEST(w.lm_head.data == w.embed_tokens.data);  // tied
  BOOST_TEST(w.layers.size() == 2u);
  for (const auto& l : w.layers) {
    BOOST_TEST(l.q_proj.rows == 128);
    BOOST_TEST(l.q_proj.cols == 64);
    BOOST_TEST(l.k_proj.rows == 64);
    BOOST_TEST(l.v_proj.rows == 64);
    BOOST_TEST(l.o_proj.rows == 64);
    BOOST_TEST(l.o_proj.cols == 128);
    BOOST_TEST(l.gate_proj.rows == 160);
    BOOST_TEST(l.up_proj.rows == 160);
    BOOST_TEST(l.down_proj.rows == 64);
    BOOST_TEST(l.down_proj.cols == 160);
    BOOST_TEST(l.q_norm.size() == 32u);
    BOOST_TEST(l.k_norm.size() == 32u);
    BOOST_TEST(l.input_layernorm.size() == 64u);
    BOOST_TEST(l.post_attention_layernorm.size() == 64u);
    BOOST_TEST(l.router.data == nullptr);
    BOOST_TEST(l.experts.empty());
  }
  BOOST_TEST(w.norm.size() == 64u);
  // 2 layers x (110592 bf16 linear + 768 f32 norm) + tied embed 524288 + final norm 256.
  BOOST_TEST(w.bytes == 747264u);
  BOOST_TEST(w.active_bytes == w.bytes);
  BOOST_TEST(w.num_parameters == 373184);
  // Weights are used in place: the pointer lies inside the mapping.
  const uint8_t* base = ck->files[0].data();
  const auto* q = static_cast<const uint8_t*>(w.layers[1].q_proj.data);
  BOOST_TEST((q > base && q + w.layers[1].q_proj.bytes() <= base + ck->files[0].size()));
  // Norms are widened exactly from the stored bf16.
  safetensors_file f(test::golden("tiny-dense") + "/model.safetensors");
  const tensor_info* kn = f.find("model.layers.1.self_attn.k_norm.weight");
  for (size_t i = 0; i < 32; ++i) {
    uint16_t v;
    std::memcpy(&v, kn->data + 2 * i, 2);
    BOOST_TEST(w.layers[1].k_norm[i] == bf16_to_f32(v));
  }
  BOOST_TEST(ck->generation.do_sample);
  BOOST_TEST(ck->generation.temperature == 0.6f);
  BOOST_TEST(ck->generation.eos_token_ids == (std::vector<int32_t>{4095, 4094}));
}

BOOST_AUTO_TEST_CASE(golden_untied_sharded) {
  auto ck = load_checkpoint(test::golden("tiny-untied-sharded"));
  const model_weights& w = ck->weights;
  BOOST_TEST(ck->files.size() == 2u);
  BOOST_TEST(w.layers.size() == 3u);
  BOOST_TEST((w.lm_head.type == dtype::f32));
  BOOST_TEST(w.lm_head.rows == 4096);
  BOOST_TEST(w.lm_head.data != w.embed_tokens.data);
  BOOST_TEST((w.layers[2].down_proj.type == dtype::f32));
  // lm_head is in the second shard, the embedding in the first, as the index says.
  auto inside = [](const mapped_file& m, const void* p) {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= m.data() && b < m.data() + m.size();
  };
  int lm_file = inside(ck->files[0], w.lm_head.data) ? 0 : 1;
  int embed_file = inside(ck->files[0], w.embed_tokens.data) ? 0 : 1;
  BOOST_TEST(lm_file != embed_file);
  // Untied: the embedding table is not read per token, lm_head is.
  BOOST_TEST(w.bytes == 3u * (2u * 128 * 64 * 4 + 2u * 64 * 64 * 4 + 3u * 160 * 64 * 4 + (32 + 32 + 64 + 64) * 4u) +
                            4096u * 64 * 4 + 64u * 4);
}

BOOST_AUTO_TEST_CASE(golden_moe) {
  auto ck = load_checkpoint(test::golden("tiny-moe"));
  const model_weights& w = ck->weights;
  BOOST_TEST(w.layers.size() == 2u);
  for (const auto& l : w.layers) {
    BOOST_TEST(l.router.rows == 8);
    BOOST_TEST(l.router.cols == 64);
    BOOST_TEST(l.gate_proj.data == nullptr);
    BOOST_REQUIRE(l.experts.size() == 8u);
    for (const auto& e : l.experts) {
      BOOST_TEST(e.gate_proj.rows == 48);
      BOOST_TEST(e.gate_proj.cols == 64);
      BOOST_TEST(e.up_proj.rows == 48);
      BOOST_TEST(e.down_proj.rows == 64);
      BOOST_TEST(e.down_proj.cols == 48);
      BOOST_TEST((e.down_proj.type == dtype::bf16));
    }
  }
  BOOST_TEST(w.lm_head.data != w.embed_tokens.data);
  const size_t expert = 3u * 48 * 64 * 2;
  BOOST_TEST(w.bytes - w.active_bytes == 2u * (8u - 2u) * expert);
}

BOOST_AUTO_TEST_CASE(golden_full_vocab) {
  auto ck = load_checkpoint(test::golden("e2e-full-vocab"));
  BOOST_TEST(ck->weights.embed_tokens.rows == 151936);
  BOOST_TEST(ck->weights.embed_tokens.cols == 32);
  BOOST_TEST(ck->weights.layers[0].q_proj.rows == 64);  // 4 heads x head_dim 16
  BOOST_TEST(ck->weights.lm_head.data == ck->weights.embed_tokens.data);
  BOOST_TEST(ck->generation.eos_token_ids == (std::vector<int32_t>{151645, 151643}));
}

BOOST_AUTO_TEST_CASE(fingerprint_is_fixed_and_tracks_weights) {
  auto a = load_checkpoint(test::golden("tiny-dense"));
  const std::string fp = model_fingerprint(*a);
  // Fixed algorithm, no seed: this exact string in every process on every machine.
  BOOST_TEST(fp == "qwen3-v4096-h64-l2-a4x2x32-i160-bf16-050784d47e45c4cb");
  BOOST_TEST(fp.find(':') == std::string::npos);
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-dense"), dir.path() / "copy");
  BOOST_TEST(model_fingerprint(*load_checkpoint(dir.str("copy"))) == fp);
  BOOST_TEST(model_fingerprint(*load_checkpoint(test::golden("tiny-moe"))).rfind("qwen3_moe-v4096-h64-l2-a4x2x32-i160-e8x2x48-bf16-", 0) == 0);
  BOOST_TEST(model_fingerprint(*load_checkpoint(test::golden("tiny-untied-sharded"))).find("-f32-") != std::string::npos);
  // Same shapes, different weights: different fingerprints.
  write_small(dir.path() / "x", small_config(), {}, 0.25f);
  write_small(dir.path() / "y", small_config(), {}, 0.5f);
  std::string fx = model_fingerprint(*load_checkpoint(dir.str("x")));
  BOOST_TEST(fx != model_fingerprint(*load_checkpoint(dir.str("y"))));
  BOOST_TEST(fx == model_fingerprint(*load_checkpoint(dir.str("x"))));
  // Same weights, RoPE scaled: other K/V, so another fingerprint (prefix-cache keys must differ).
  auto scaled = load_checkpoint(test::golden("tiny-dense-yarn"));
  BOOST_TEST(model_fingerprint(*scaled) != fp);
  scaled->config.rope.factor = 2.0;
  const std::string fp2 = model_fingerprint(*scaled);
  BOOST_TEST(fp2 != model_fingerprint(*load_checkpoint(test::golden("tiny-dense-yarn"))));
  scaled->config.rope = rope_scaling{};
  BOOST_TEST(model_fingerprint(*scaled) == fp);  // max_position_embeddings is not part of it
}

BOOST_AUTO_TEST_CASE(accepts_tied_lm_head_copy_inv_freq_and_mixed_dtypes) {
  test::temp_dir dir;
  const model_config c = small_config();
  write_small(dir.path(), c, [&](std::vector<tensor_to_write>& ts) {
    ts.push_back(filled("lm_head.weight", dtype::bf16, {128, 16}));  // as Qwen3-0.6B ships it
    ts.push_back(filled("model.layers.0.self_attn.rotary_emb.inv_freq", dtype::f32, {4}));
    find_tensor(ts, "model.layers.1.mlp.up_proj.weight").type = dtype::f32;
    find_tensor(ts, "model.layers.1.self_attn.q_proj.weight").type = dtype::f16;
    find_tensor(ts, "model.norm.weight").type = dtype::f32;
  });
  auto ck = load_checkpoint(dir.str());
  BOOST_TEST(ck->weights.lm_head.data == ck->weights.embed_tokens.data);  // transformers' choice
  BOOST_TEST((ck->weights.layers[1].up_proj.type == dtype::f32));
  BOOST_TEST((ck->weights.layers[1].q_proj.type == dtype::f16));
  BOOST_TEST(ck->generation.eos_token_ids == std::vector<int32_t>{127});  // from config.json
}

BOOST_AUTO_TEST_CASE(copies_misaligned_tensors) {
  // An odd header length puts every 2-byte tensor at an odd address: copied, values intact.
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  rewrite_header(dir.path() / "model.safetensors", [](json&) {}, /*odd=*/true);
  BOOST_REQUIRE(static_cast<uint8_t>(test::read_file(dir.path() / "model.safetensors")[0]) % 2 == 1);
  auto ck = load_checkpoint(dir.str());
  BOOST_TEST(!ck->aligned_copies.empty());
  const auto& q = ck->weights.layers[0].q_proj;
  BOOST_TEST(reinterpret_cast<uintptr_t>(q.data) % 2 == 0u);
  uint16_t v;
  std::memcpy(&v, q.data, 2);
  BOOST_TEST(bf16_to_f32(v) == 0.25f);
}

BOOST_AUTO_TEST_CASE(missing_tensor) {
  test::temp_dir dir;
  write_small(dir.path(), small_config(),
              [](auto& ts) { erase_tensor(ts, "model.layers.1.self_attn.k_norm.weight"); });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors"), "missing tensor 'model.layers.1.self_attn.k_norm.weight'",
                "shape [8] = [head_dim]"});
}

BOOST_AUTO_TEST_CASE(missing_untied_lm_head) {
  test::temp_dir dir;
  model_config c = small_config();
  c.tie_word_embeddings = false;
  write_small(dir.path(), c, [](auto& ts) { erase_tensor(ts, "lm_head.weight"); });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors"), "missing tensor 'lm_head.weight'", "[128, 16]"});
}

// A sequence classifier: score.weight [num_labels, hidden] in lm_head's place, loaded as the logits'
// head; a missing or misshapen one, or an lm_head beside it, is named.
BOOST_AUTO_TEST_CASE(sequence_classifier_score_head) {
  model_config c = small_config();
  make_classifier(c, 3);
  test::temp_dir ok;
  write_small(ok.path(), c);
  auto ck = load_checkpoint(ok.str());
  BOOST_TEST(ck->config.num_labels == 3);
  BOOST_TEST(ck->weights.lm_head.rows == 3);
  BOOST_TEST(ck->weights.lm_head.data != ck->weights.embed_tokens.data);
  test::temp_dir missing;
  write_small(missing.path(), c, [](auto& ts) { erase_tensor(ts, "score.weight"); });
  expect_error([&] { load_checkpoint(missing.str()); }, errc::invalid_checkpoint,
               {"missing tensor 'score.weight'", "shape [3, 16] = [num_labels, hidden_size]"});
  test::temp_dir shape;
  write_small(shape.path(), c, [](auto& ts) { find_tensor(ts, "score.weight").shape = {2, 16}; });
  expect_error([&] { load_checkpoint(shape.str()); }, errc::invalid_checkpoint,
               {"tensor 'score.weight' has shape [2, 16]", "[3, 16] = [num_labels, hidden_size]"});
  test::temp_dir stray;
  write_small(stray.path(), c, [](auto& ts) { ts.push_back(filled("lm_head.weight", dtype::bf16, {128, 16})); });
  expect_error([&] { load_checkpoint(stray.str()); }, errc::invalid_checkpoint,
               {"unexpected tensor 'lm_head.weight'", "Qwen3ForSequenceClassification", "a score head of 3 labels"});
}

BOOST_AUTO_TEST_CASE(unexpected_tensor) {
  test::temp_dir dir;
  write_small(dir.path(), small_config(), [](auto& ts) {
    ts.push_back(filled("model.layers.0.mlp.extra.weight", dtype::bf16, {4, 4}));
  });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors"), "unexpected tensor 'model.layers.0.mlp.extra.weight'"});
  // A layer beyond num_hidden_layers (config says fewer layers than the weights have).
  test::temp_dir dir2;
  model_config three = small_config();
  three.num_hidden_layers = 3;
  write_small(dir2.path(), three);
  test::write_file(dir2.path() / "config.json", to_config_json(small_config()));
  expect_error([&] { load_checkpoint(dir2.str()); }, errc::invalid_checkpoint,
               {"unexpected tensor 'model.layers.2.", "2 layers"});
}

BOOST_AUTO_TEST_CASE(wrong_shape) {
  test::temp_dir dir;
  write_small(dir.path(), small_config(),
              [](auto& ts) { find_tensor(ts, "model.layers.0.self_attn.k_proj.weight").shape = {16, 16}; });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors"), "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [16, 16]",
                "[8, 16] = [num_key_value_heads * head_dim, hidden_size]"});
}

BOOST_AUTO_TEST_CASE(unknown_dtype) {
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  rewrite_header(dir.path() / "model.safetensors",
                 [](json& h) { h["model.layers.1.mlp.down_proj.weight"]["dtype"] = "BF17"; });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors"), "'model.layers.1.mlp.down_proj.weight'", "unknown dtype \"BF17\""});
}

BOOST_AUTO_TEST_CASE(unsupported_weight_dtype) {
  test::temp_dir dir;
  write_small(dir.path(), small_config(),
              [](auto& ts) { find_tensor(ts, "model.layers.0.mlp.up_proj.weight").type = dtype::i8; });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::unsupported,
               {dir.str("model.safetensors"), "'model.layers.0.mlp.up_proj.weight' has dtype I8",
                "expected F32, F16 or BF16"});
}

BOOST_AUTO_TEST_CASE(truncated_file) {
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  const fs::path file = dir.path() / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {file.string(), "truncated", "tensor '"});
}

BOOST_AUTO_TEST_CASE(corrupt_header_length) {
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  const fs::path file = dir.path() / "model.safetensors";
  std::string bytes = test::read_file(file);
  bytes[5] = '\x01';  // length ~ 2^40
  test::write_file(file, bytes);
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {file.string(), "header length", "exceeds the file size"});
}

BOOST_AUTO_TEST_CASE(corrupt_header_json) {
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  const fs::path file = dir.path() / "model.safetensors";
  std::string bytes = test::read_file(file);
  bytes[8 + 5] = '\x01';
  test::write_file(file, bytes);
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {file.string(), "not valid JSON"});
}

BOOST_AUTO_TEST_CASE(corrupt_header_offsets) {
  test::temp_dir dir;
  write_small(dir.path(), small_config());
  const fs::path file = dir.path() / "model.safetensors";
  rewrite_header(file, [](json& h) {
    h["model.embed_tokens.weight"]["data_offsets"] = {1u << 30, (1u << 30) + 128 * 16 * 2};
  });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {file.string(), "'model.embed_tokens.weight'", "truncated"});
  write_small(dir.path(), small_config());
  rewrite_header(file, [](json& h) {
    auto& o = h["model.norm.weight"]["data_offsets"];
    o = {o[0].get<uint64_t>(), o[0].get<uint64_t>() + 30};
  });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {file.string(), "'model.norm.weight'", "expected 32 bytes"});
}

BOOST_AUTO_TEST_CASE(missing_shard_file) {
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-untied-sharded"), dir.path());
  fs::remove(dir.path() / "model-00002-of-00002.safetensors");
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model.safetensors.index.json"), "model-00002-of-00002.safetensors", "does not exist"});
}

BOOST_AUTO_TEST_CASE(index_names_a_missing_tensor) {
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-untied-sharded"), dir.path());
  const fs::path index = dir.path() / "model.safetensors.index.json";
  edit_json(index, [](json& j) { j["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors"; });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("model-00001-of-00002.safetensors"), "missing tensor 'lm_head.weight'",
                "model.safetensors.index.json places in this file"});
  // Not listed at all.
  test::copy_dir(test::golden("tiny-untied-sharded"), dir.path() / "b");
  edit_json(dir.path() / "b" / "model.safetensors.index.json",
            [](json& j) { j["weight_map"].erase("model.norm.weight"); });
  expect_error([&] { load_checkpoint(dir.str("b")); }, errc::invalid_checkpoint,
               {dir.str("b/model.safetensors.index.json"), "missing tensor 'model.norm.weight'", "weight_map"});
  // Listed but not part of the model.
  test::copy_dir(test::golden("tiny-untied-sharded"), dir.path() / "c");
  edit_json(dir.path() / "c" / "model.safetensors.index.json", [](json& j) {
    j["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
  });
  expect_error([&] { load_checkpoint(dir.str("c")); }, errc::invalid_checkpoint,
               {dir.str("c/model.safetensors.index.json"), "unexpected tensor 'model.layers.9.mlp.up_proj.weight'"});
  // A malformed index.
  test::copy_dir(test::golden("tiny-untied-sharded"), dir.path() / "d");
  test::write_file(dir.path() / "d" / "model.safetensors.index.json", "{\"weight_map\": [");
  expect_error([&] { load_checkpoint(dir.str("d")); }, errc::invalid_checkpoint,
               {dir.str("d/model.safetensors.index.json"), "not valid JSON"});
  test::write_file(dir.path() / "d" / "model.safetensors.index.json", "{\"metadata\": {\"total_size\": 1e999}}");
  expect_error([&] { load_checkpoint(dir.str("d")); }, errc::invalid_checkpoint,
               {dir.str("d/model.safetensors.index.json"), "not valid JSON", "number overflow"});
}

BOOST_AUTO_TEST_CASE(unsupported_architecture) {
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-dense"), dir.path());
  edit_json(dir.path() / "config.json", [](json& j) {
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["model_type"] = "qwen2";
  });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::unsupported,
               {dir.str("config.json"), "architectures", "Qwen2ForCausalLM", "Qwen3ForCausalLM"});
}

BOOST_AUTO_TEST_CASE(unsupported_config_value) {
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-moe"), dir.path());
  edit_json(dir.path() / "config.json",
            [](json& j) { j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}}; });
  expect_error([&] { load_checkpoint(dir.str()); }, errc::unsupported,
               {dir.str("config.json"), "rope_scaling", "\"dynamic\""});
}

BOOST_AUTO_TEST_CASE(missing_config_and_weights) {
  test::temp_dir dir;
  test::copy_dir(test::golden("tiny-dense"), dir.path());
  fs::remove(dir.path() / "config.json");
  expect_error([&] { load_checkpoint(dir.str()); }, errc::invalid_checkpoint,
               {dir.str("config.json"), "not found"});
  test::copy_dir(test::golden("tiny-dense"), dir.path() / "b");
  fs::remove(dir.path() / "b" / "model.safetensors");
  expect_error([&] { load_checkpoint(dir.str("b")); }, errc::invalid_checkpoint,
               {dir.str("b"), "no model.safetensors"});
  test::write_file(dir.path() / "b" / "pytorch_model.bin", "not read");
  expect_error([&] { load_checkpoint(dir.str("b")); }, errc::invalid_checkpoint,
               {dir.str("b"), "pytorch_model.bin checkpoints are not supported: convert them to safetensors"});
  expect_error([&] { load_checkpoint(dir.str("nope")); }, errc::invalid_checkpoint,
               {dir.str("nope"), "not a directory"});
  // generation_config.json is optional, but a broken one is an error.
  test::copy_dir(test::golden("tiny-dense"), dir.path() / "c");
  test::write_file(dir.path() / "c" / "generation_config.json", "{\"temperature\": -1}");
  expect_error([&] { load_checkpoint(dir.str("c")); }, errc::invalid_checkpoint,
               {dir.str("c/generation_config.json"), "temperature"});
}

BOOST_AUTO_TEST_SUITE_END()

// A bare Qwen3Model export (Qwen3-Embedding's layout: no "model." prefix, no lm_head, tied):
// the same weights as the prefixed checkpoint; its errors name tensors as its files do.
BOOST_AUTO_TEST_CASE(bare_qwen3_model_export) {
  auto strip = [](std::vector<tensor_to_write>& ts) {
    for (auto& t : ts)
      if (t.name.rfind("model.", 0) == 0) t.name = t.name.substr(6);
  };
  test::temp_dir prefixed, bare;
  write_small(prefixed.path(), small_config());
  write_small(bare.path(), small_config(), strip);
  auto want = load_checkpoint(prefixed.str());
  auto got = load_checkpoint(bare.str());
  BOOST_TEST(got->weights.bytes == want->weights.bytes);
  BOOST_TEST(got->weights.lm_head.data == got->weights.embed_tokens.data);
  const auto& a = got->weights.layers[1].down_proj;
  const auto& b = want->weights.layers[1].down_proj;
  BOOST_TEST(std::memcmp(a.data, b.data, static_cast<size_t>(a.rows * a.cols) * dtype_size(a.type)) == 0);
  BOOST_TEST((got->weights.norm == want->weights.norm));

  test::temp_dir missing;
  write_small(missing.path(), small_config(), [&](auto& ts) {
    strip(ts);
    erase_tensor(ts, "layers.1.self_attn.k_norm.weight");
  });
  expect_error([&] { load_checkpoint(missing.str()); }, errc::invalid_checkpoint,
               {"missing tensor 'layers.1.self_attn.k_norm.weight'", "shape [8] = [head_dim]"});
  test::temp_dir extra;
  write_small(extra.path(), small_config(), [&](auto& ts) {
    strip(ts);
    ts.push_back(filled("layers.0.mlp.extra.weight", dtype::bf16, {4, 4}));
  });
  expect_error([&] { load_checkpoint(extra.str()); }, errc::invalid_checkpoint,
               {"unexpected tensor 'layers.0.mlp.extra.weight'"});
  // Untied without lm_head (Qwen3-Embedding-8B's layout): loads for embeddings only, flagged; the
  // prefixed layout still needs its lm_head.
  model_config c = small_config();
  c.tie_word_embeddings = false;
  test::temp_dir untied;
  write_small(untied.path(), c, [&](auto& ts) {
    strip(ts);
    erase_tensor(ts, "lm_head.weight");
  });
  auto headless = load_checkpoint(untied.str());
  BOOST_TEST(headless->no_lm_head);
  BOOST_TEST(!got->no_lm_head);
  BOOST_TEST(headless->weights.lm_head.data == headless->weights.embed_tokens.data);
  test::temp_dir prefixed_untied;
  write_small(prefixed_untied.path(), c, [&](auto& ts) { erase_tensor(ts, "lm_head.weight"); });
  expect_error([&] { load_checkpoint(prefixed_untied.str()); }, errc::invalid_checkpoint,
               {"missing tensor 'lm_head.weight'"});
}
