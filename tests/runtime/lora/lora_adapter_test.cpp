// load_lora_adapter on adapters PEFT itself saved (tests/data/golden/*-lora*/adapter, made by
// tools/reference/lora_golden.py) and on broken copies of them: each refusal names the file and
// the field or tensor.
#define BOOST_TEST_MODULE troupe_lora
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/config.hpp"
#include "runtime/model/safetensors.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using namespace troupe::test;
using json = nlohmann::json;

namespace {

model_config config_of(const std::string& set) {
  const std::string path = golden(set) + "/config.json";
  return parse_model_config(read_file(path), path);
}

std::string adapter_of(const std::string& set) { return golden(set) + "/adapter"; }

// A copy of tiny-dense-lora's adapter whose config and tensors a test may change.
struct adapter_copy {
  temp_dir tmp;
  fs::path dir = tmp.path() / "my-adapter";
  adapter_copy() {
    fs::create_directories(dir);
    fs::copy_file(adapter_of("tiny-dense-lora") + "/adapter_config.json", dir / "adapter_config.json");
    fs::copy_file(adapter_of("tiny-dense-lora") + "/adapter_model.safetensors", dir / "adapter_model.safetensors");
  }
  void edit_config(const std::function<void(json&)>& fn) {
    json c = json::parse(read_file(dir / "adapter_config.json"));
    fn(c);
    write_file(dir / "adapter_config.json", c.dump(2));
  }
  // Rewrites the tensors: fn may rename, reshape, drop (return false) or retype them.
  void edit_tensors(const std::function<bool(tensor_to_write&)>& fn, std::vector<tensor_to_write> extra = {}) {
    const std::string path = (dir / "adapter_model.safetensors").string();
    std::vector<std::vector<uint8_t>> keep;
    std::vector<tensor_to_write> out;
    {
      safetensors_file f(path);
      for (const tensor_info& t : f.tensors()) {
        keep.emplace_back(t.data, t.data + t.bytes());
        tensor_to_write w{t.name, t.type, t.shape, keep.back().data(), {}};
        if (fn(w)) out.push_back(w);
      }
    }
    for (auto& e : extra) out.push_back(e);
    write_safetensors(path, out);
  }
  lora_adapter load(const std::string& set = "tiny-dense") const { return load_lora_adapter(dir.string(), config_of(set)); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_projection_rank_8_alpha_16) {
  const auto cfg = config_of("tiny-dense");
  const lora_adapter a = load_lora_adapter(adapter_of("tiny-dense-lora"), cfg);
  BOOST_TEST(a.name == "adapter");  // the directory's name
  BOOST_TEST(a.r == 8);
  BOOST_TEST(a.pairs == cfg.num_hidden_layers * kLoraTargets);
  BOOST_TEST(a.identity.size() == 16u);
  const int64_t q = cfg.num_attention_heads * cfg.head_dim, kv = cfg.num_key_value_heads * cfg.head_dim;
  const std::pair<int64_t, int64_t> shapes[] = {{q, cfg.hidden_size},
                                                {kv, cfg.hidden_size},
                                                {kv, cfg.hidden_size},
                                                {cfg.hidden_size, q},
                                                {cfg.intermediate_size, cfg.hidden_size},
                                                {cfg.intermediate_size, cfg.hidden_size},
                                                {cfg.hidden_size, cfg.intermediate_size}};
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l)
    for (int t = 0; t < kLoraTargets; ++t) {
      const lora_pair* p = a.pair(l, static_cast<lora_target>(t));
      BOOST_REQUIRE(p);
      BOOST_TEST(p->rank == 8);
      BOOST_TEST(p->scaling == 2.0f);
      BOOST_TEST(p->out == shapes[t].first);
      BOOST_TEST(p->in == shapes[t].second);
      BOOST_TEST(p->a.size() == static_cast<size_t>(8 * p->in));
      BOOST_TEST(p->b.size() == static_cast<size_t>(p->out * 8));
    }
  // The values are the file's: one element of each matrix, read back by name.
  safetensors_file f(adapter_of("tiny-dense-lora") + "/adapter_model.safetensors");
  const tensor_info* ta = f.find("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight");
  const tensor_info* tb = f.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  BOOST_REQUIRE(ta && tb && ta->type == dtype::f32);
  float va, vb;
  std::memcpy(&va, ta->data + 4 * 7, 4);
  std::memcpy(&vb, tb->data + 4 * 5, 4);
  BOOST_TEST(a.pair(1, lora_target::down_proj)->a[7] == va);
  BOOST_TEST(a.pair(1, lora_target::down_proj)->b[5] == vb);
  BOOST_TEST(va != 0.0f);
}

BOOST_AUTO_TEST_CASE(rslora_rank_pattern_and_bf16_tensors) {
  const auto cfg = config_of("tiny-dense");
  const lora_adapter a = load_lora_adapter(adapter_of("tiny-dense-lora-rs"), cfg, "rs");
  BOOST_TEST(a.name == "rs");
  BOOST_TEST(a.use_rslora);
  BOOST_TEST(a.pairs == cfg.num_hidden_layers * 3);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    BOOST_TEST(!a.pair(l, lora_target::k_proj));
    BOOST_TEST(!a.pair(l, lora_target::gate_proj));
    BOOST_REQUIRE(a.pair(l, lora_target::q_proj));
    BOOST_TEST(a.pair(l, lora_target::q_proj)->rank == 4);
    BOOST_TEST(a.pair(l, lora_target::q_proj)->scaling == 3.0f);  // 6 / sqrt(4)
    BOOST_REQUIRE(a.pair(l, lora_target::down_proj));
    BOOST_TEST(a.pair(l, lora_target::down_proj)->rank == 2);     // rank_pattern
    BOOST_TEST(a.pair(l, lora_target::down_proj)->scaling == static_cast<float>(6.0 / std::sqrt(2.0)));
  }
  BOOST_TEST(a.identity != load_lora_adapter(adapter_of("tiny-dense-lora"), cfg).identity);
  BOOST_TEST(a.identity == load_lora_adapter(adapter_of("tiny-dense-lora-rs"), cfg, "other name").identity);
}

// vLLM's max_lora_rank counts the highest rank of any pair (rank_pattern's included).
BOOST_AUTO_TEST_CASE(max_lora_rank_refuses_higher_ranks_by_name) {
  const auto cfg = config_of("tiny-dense");
  const lora_adapter rs = load_lora_adapter(adapter_of("tiny-dense-lora-rs"), cfg, "rs");  // ranks 4 and 2
  BOOST_TEST(rs.max_rank() == 4);
  check_lora_rank(rs, 0, "max_lora_rank");
  check_lora_rank(rs, 4, "max_lora_rank");
  try {
    check_lora_rank(rs, 3, "model.max_lora_rank (--max-lora-rank)");
    BOOST_FAIL("expected an error");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == troupe::errc::invalid_argument));
    BOOST_TEST(std::string(e.what()) == "LoRA adapter 'rs' (" + adapter_of("tiny-dense-lora-rs") +
                                            ") has rank 4, above model.max_lora_rank (--max-lora-rank) 3");
  }
}

BOOST_AUTO_TEST_CASE(identity_follows_the_values) {
  adapter_copy c;
  const std::string before = c.load().identity;
  c.edit_tensors([](tensor_to_write& t) {
    if (t.name.find("layers.0.self_attn.q_proj.lora_B") != std::string::npos) {
      auto* f = const_cast<float*>(static_cast<const float*>(t.data));
      f[3] += 1.0f;
    }
    return true;
  });
  BOOST_TEST(c.load().identity != before);
  c.edit_config([](json& j) { j["lora_alpha"] = 17; });
  const lora_adapter a = c.load();
  BOOST_TEST(a.pair(0, lora_target::q_proj)->scaling == 17.0f / 8.0f);
}

BOOST_AUTO_TEST_CASE(config_errors_name_the_field) {
  const std::string cfg_file = "adapter_config.json";
  struct bad {
    const char* what;
    std::function<void(json&)> edit;
    errc code;
    std::vector<std::string> needles;
  };
  const bad cases[] = {
      {"no peft_type", [](json& j) { j.erase("peft_type"); }, errc::invalid_checkpoint, {"peft_type", "missing"}},
      {"IA3", [](json& j) { j["peft_type"] = "IA3"; }, errc::unsupported, {"peft_type", "IA3"}},
      {"no r", [](json& j) { j.erase("r"); }, errc::invalid_checkpoint, {"r must be a positive integer"}},
      {"r 0", [](json& j) { j["r"] = 0; }, errc::invalid_checkpoint, {"r must be a positive integer", "got 0"}},
      {"alpha text", [](json& j) { j["lora_alpha"] = "16"; }, errc::invalid_checkpoint, {"lora_alpha"}},
      {"dora", [](json& j) { j["use_dora"] = true; }, errc::unsupported, {"use_dora", "DoRA"}},
      {"rslora text", [](json& j) { j["use_rslora"] = "yes"; }, errc::invalid_checkpoint, {"use_rslora", "true or false"}},
      {"bias", [](json& j) { j["bias"] = "all"; }, errc::unsupported, {"bias", "\"all\""}},
      {"lora_bias", [](json& j) { j["lora_bias"] = true; }, errc::unsupported, {"lora_bias"}},
      {"fan_in_fan_out", [](json& j) { j["fan_in_fan_out"] = true; }, errc::unsupported, {"fan_in_fan_out"}},
      {"modules_to_save", [](json& j) { j["modules_to_save"] = {"lm_head"}; }, errc::unsupported, {"modules_to_save", "lm_head"}},
      {"alpha_pattern", [](json& j) { j["alpha_pattern"] = {{"q_proj", 4}}; }, errc::unsupported, {"alpha_pattern"}},
      {"aLoRA", [](json& j) { j["alora_invocation_tokens"] = {1, 2}; }, errc::unsupported, {"alora_invocation_tokens"}},
      {"layer_replication", [](json& j) { j["layer_replication"] = {{0, 1}}; }, errc::unsupported, {"layer_replication"}},
      {"not an object", [](json& j) { j = json::array({1, 2}); }, errc::invalid_checkpoint, {"expected a JSON object"}},
      {"trainable tokens", [](json& j) { j["trainable_token_indices"] = {1, 2}; }, errc::unsupported,
       {"trainable_token_indices"}},
      {"arrow", [](json& j) { j["arrow_config"] = {{"top_k", 2}}; }, errc::unsupported, {"arrow_config"}},
      {"target_parameters", [](json& j) { j["target_parameters"] = {"mlp.experts.gate_up_proj"}; }, errc::unsupported,
       {"target_parameters"}},
      {"bdlora", [](json& j) { j["use_bdlora"] = true; }, errc::unsupported, {"use_bdlora"}},
      {"kasa", [](json& j) { j["kasa_config"] = {{"k", 1}}; }, errc::unsupported, {"kasa_config"}},
      {"monteclora", [](json& j) { j["monteclora_config"] = {{"n", 1}}; }, errc::unsupported, {"monteclora_config"}},
      {"velora", [](json& j) { j["velora_config"] = {{"n", 1}}; }, errc::unsupported, {"velora_config"}},
      {"qalora", [](json& j) { j["use_qalora"] = true; }, errc::unsupported, {"use_qalora", "QA-LoRA"}},
      {"dora text", [](json& j) { j["use_dora"] = 1; }, errc::invalid_checkpoint, {"use_dora", "true or false"}},
  };
  for (const bad& b : cases) {
    BOOST_TEST_CONTEXT(b.what) {
      adapter_copy c;
      c.edit_config(b.edit);
      try {
        c.load();
        BOOST_ERROR("loaded");
      } catch (const troupe::error& e) {
        BOOST_TEST(to_string(e.code()) == to_string(b.code), e.what());
        BOOST_TEST(std::string(e.what()).find(cfg_file) != std::string::npos, e.what());
        for (const auto& n : b.needles) BOOST_TEST(std::string(e.what()).find(n) != std::string::npos, e.what());
      }
    }
  }
  adapter_copy c;
  write_file(c.dir / "adapter_config.json", "{\"peft_type\": \"LORA\", ");
  expect_error([&] { c.load(); }, errc::invalid_checkpoint, {"adapter_config.json", "not valid JSON"});
  // Fields of initialisation only, and ones Troupe does not know, change nothing.
  adapter_copy d;
  d.edit_config([](json& j) {
    j["init_lora_weights"] = "gaussian";
    j["loftq_config"] = {{"loftq_bits", 4}};
    j["a_field_of_a_later_peft"] = 1;
  });
  BOOST_TEST(d.load().identity == load_lora_adapter(adapter_of("tiny-dense-lora"), config_of("tiny-dense")).identity);
}

BOOST_AUTO_TEST_CASE(missing_files) {
  temp_dir tmp;
  expect_error([&] { load_lora_adapter(tmp.str("nowhere"), config_of("tiny-dense")); }, errc::io_error,
               {"nowhere/adapter_config.json", "PEFT"});
  adapter_copy c;
  fs::remove(c.dir / "adapter_model.safetensors");
  expect_error([&] { c.load(); }, errc::io_error, {"adapter_model.safetensors"});
  write_file(c.dir / "adapter_model.bin", "pickle");
  expect_error([&] { c.load(); }, errc::io_error, {"adapter_model.bin", "safe_serialization"});
}

BOOST_AUTO_TEST_CASE(tensor_errors_name_the_tensor) {
  const std::string q_a = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  {  // LoRA on lm_head
    adapter_copy c;
    std::vector<float> z(8 * 64, 0.5f);
    c.edit_tensors([](tensor_to_write&) { return true; },
                   {tensor_to_write{"base_model.model.lm_head.lora_A.weight", dtype::f32, {8, 64}, z.data(), {}}});
    expect_error([&] { c.load(); }, errc::unsupported, {"lm_head.lora_A.weight", "q/k/v/o_proj"});
  }
  {  // an A without its B
    adapter_copy c;
    c.edit_tensors([](tensor_to_write& t) { return t.name.find("layers.1.mlp.up_proj.lora_B") == std::string::npos; });
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {"model.layers.1.up_proj", "no lora_B"});
  }
  {  // a shape that does not fit the model
    adapter_copy c;
    c.edit_tensors([&](tensor_to_write& t) {
      if (t.name == q_a) t.shape = {16, 32};
      return true;
    });
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {q_a, "[16, 32]", "expected [16, 64]", "q_proj"});
  }
  {  // A and B of different ranks
    adapter_copy c;
    std::vector<float> z(4 * 64, 0.5f);
    c.edit_tensors([&](tensor_to_write& t) { return t.name != q_a; },
                   {tensor_to_write{q_a, dtype::f32, {4, 64}, z.data(), {}}});
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {"q_proj", "rank"});
  }
  {  // a layer the model does not have
    adapter_copy c;
    c.edit_tensors([](tensor_to_write& t) {
      const auto at = t.name.find("layers.1.");
      if (at != std::string::npos) t.name.replace(at, 9, "layers.7.");
      return true;
    });
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {"layers.7.", "names layer 7", "2 layers"});
  }
  {  // an integer dtype
    adapter_copy c;
    std::vector<int8_t> z(8 * 64, 1);
    c.edit_tensors([&](tensor_to_write& t) { return t.name != q_a; }, {tensor_to_write{q_a, dtype::i8, {8, 64}, z.data(), {}}});
    expect_error([&] { c.load(); }, errc::unsupported, {q_a, "F32, BF16 or F16"});
  }
  {  // not a matrix
    adapter_copy c;
    std::vector<float> z(2 * 8 * 64, 0.5f);
    c.edit_tensors([&](tensor_to_write& t) { return t.name != q_a; }, {tensor_to_write{q_a, dtype::f32, {2, 8, 64}, z.data(), {}}});
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {q_a, "[2, 8, 64]", "expected a matrix"});
  }
  {  // nothing in it
    adapter_copy c;
    c.edit_tensors([](tensor_to_write&) { return false; });
    expect_error([&] { c.load(); }, errc::invalid_checkpoint, {"no lora_A / lora_B"});
  }
  {  // LoRA on the MLP of a mixture-of-experts layer
    temp_dir tmp;
    fs::create_directories(tmp.path() / "a");
    fs::copy_file(adapter_of("tiny-dense-lora") + "/adapter_config.json", tmp.path() / "a" / "adapter_config.json");
    fs::copy_file(adapter_of("tiny-dense-lora") + "/adapter_model.safetensors", tmp.path() / "a" / "adapter_model.safetensors");
    expect_error([&] { load_lora_adapter(tmp.str("a"), config_of("tiny-moe")); }, errc::unsupported,
                 {"mlp", "mixture-of-experts"});
  }
}

BOOST_AUTO_TEST_CASE(attention_only_adapter_on_a_moe_model) {
  const lora_adapter a = load_lora_adapter(adapter_of("tiny-moe-lora"), config_of("tiny-moe"));
  BOOST_TEST(a.pairs == 2 * 4);
  BOOST_TEST(!a.pair(0, lora_target::gate_proj));
  BOOST_TEST(a.pair(1, lora_target::o_proj)->scaling == 2.0f);
}
