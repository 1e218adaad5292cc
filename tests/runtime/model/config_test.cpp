// config.json / generation_config.json: the golden configs, transformers' defaults and rules, and
// one rejection per unsupported or malformed value (error code, file and field named).
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "runtime/model/config.hpp"
#include "runtime/model/generation_source.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using troupe::test::expect_error;
using json = nlohmann::json;

namespace {

json golden_config(const std::string& set) {
  return json::parse(test::read_file(test::golden(set) + "/config.json"));
}

model_config parse(const json& j) { return parse_model_config(j.dump(), "/m/config.json"); }

// Parsing `j` must fail with `code`, naming config.json, the field and `detail`.
void expect_config_error(const json& j, errc code, const std::string& field, const std::string& detail) {
  expect_error([&] { parse(j); }, code, {"/m/config.json", field, detail});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config)

BOOST_AUTO_TEST_CASE(golden_dense) {
  model_config c = parse(golden_config("tiny-dense"));
  BOOST_TEST((c.arch == architecture::qwen3));
  BOOST_TEST(c.vocab_size == 4096);
  BOOST_TEST(c.hidden_size == 64);
  BOOST_TEST(c.intermediate_size == 160);
  BOOST_TEST(c.num_hidden_layers == 2);
  BOOST_TEST(c.num_attention_heads == 4);
  BOOST_TEST(c.num_key_value_heads == 2);
  BOOST_TEST(c.head_dim == 32);  // != hidden / heads = 16
  BOOST_TEST(c.rms_norm_eps == 1e-6);
  BOOST_TEST(c.rope_theta == 1e6);
  BOOST_TEST(c.max_position_embeddings == 40960);
  BOOST_TEST(c.tie_word_embeddings);
  BOOST_TEST(c.bos_token_id == 4094);
  BOOST_TEST(c.eos_token_ids == std::vector<int32_t>{4095});
  BOOST_TEST(c.torch_dtype == "bfloat16");
  BOOST_TEST(!c.layer_is_moe(0));
  BOOST_TEST(!c.layer_is_moe(1));
}

BOOST_AUTO_TEST_CASE(golden_moe) {
  model_config c = parse(golden_config("tiny-moe"));
  BOOST_TEST((c.arch == architecture::qwen3_moe));
  BOOST_TEST(c.num_experts == 8);
  BOOST_TEST(c.num_experts_per_tok == 2);
  BOOST_TEST(c.moe_intermediate_size == 48);
  BOOST_TEST(c.norm_topk_prob);
  BOOST_TEST(c.decoder_sparse_step == 1);
  BOOST_TEST(c.mlp_only_layers.empty());
  BOOST_TEST(!c.tie_word_embeddings);
  BOOST_TEST(c.layer_is_moe(0));
  BOOST_TEST(c.layer_is_moe(1));
}

BOOST_AUTO_TEST_CASE(golden_full_vocab_and_sharded) {
  model_config e = parse(golden_config("e2e-full-vocab"));
  BOOST_TEST(e.vocab_size == 151936);
  BOOST_TEST(e.hidden_size == 32);
  BOOST_TEST(e.head_dim == 16);
  BOOST_TEST(e.eos_token_ids == std::vector<int32_t>{151645});
  model_config s = parse(golden_config("tiny-untied-sharded"));
  BOOST_TEST(s.num_hidden_layers == 3);
  BOOST_TEST(!s.tie_word_embeddings);
  BOOST_TEST(s.torch_dtype == "float32");
}

// transformers: sparse iff not in mlp_only_layers, num_experts > 0 and (layer+1) % step == 0.
BOOST_AUTO_TEST_CASE(moe_layer_rule) {
  json j = golden_config("tiny-moe");
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  model_config c = parse(j);
  std::vector<bool> moe;
  for (int l = 0; l < 6; ++l) moe.push_back(c.layer_is_moe(l));
  BOOST_TEST(moe == (std::vector<bool>{false, true, false, false, false, true}));
  j["num_experts"] = 0;
  c = parse(j);
  for (int l = 0; l < 6; ++l) BOOST_TEST(!c.layer_is_moe(l));
}

BOOST_AUTO_TEST_CASE(eos_int_or_list) {
  json j = golden_config("tiny-dense");
  j["eos_token_id"] = {4095, 4094};
  BOOST_TEST(parse(j).eos_token_ids == (std::vector<int32_t>{4095, 4094}));
  j["eos_token_id"] = nullptr;
  BOOST_TEST(parse(j).eos_token_ids.empty());
  j["eos_token_id"] = "x";
  expect_config_error(j, errc::invalid_checkpoint, "eos_token_id", "token id");
  j["eos_token_id"] = 4096;  // = vocab_size
  expect_config_error(j, errc::invalid_checkpoint, "eos_token_id", "below vocab_size = 4096");
}

// transformers' defaults: Qwen3Config.head_dim = 128; Qwen3MoeConfig has none -> hidden / heads.
BOOST_AUTO_TEST_CASE(defaults_like_transformers) {
  json j = golden_config("tiny-dense");
  j.erase("head_dim");
  j.erase("num_key_value_heads");
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  j.erase("tie_word_embeddings");
  j.erase("max_position_embeddings");
  model_config c = parse(j);
  BOOST_TEST(c.head_dim == 128);
  BOOST_TEST(c.num_key_value_heads == 4);
  BOOST_TEST(c.rms_norm_eps == 1e-6);
  BOOST_TEST(c.rope_theta == 10000.0);
  BOOST_TEST(!c.tie_word_embeddings);
  BOOST_TEST(c.max_position_embeddings == 32768);
  json m = golden_config("tiny-moe");
  m.erase("head_dim");
  m.erase("decoder_sparse_step");
  m.erase("mlp_only_layers");
  m.erase("norm_topk_prob");
  c = parse(m);
  BOOST_TEST(c.head_dim == 16);
  BOOST_TEST(c.decoder_sparse_step == 1);
  BOOST_TEST(!c.norm_topk_prob);
  // Without architectures, model_type decides (AutoModelForCausalLM does the same).
  m.erase("architectures");
  BOOST_TEST((parse(m).arch == architecture::qwen3_moe));
}

BOOST_AUTO_TEST_CASE(rope_parameters_of_transformers_5) {
  json j = golden_config("tiny-dense");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  BOOST_TEST(parse(j).rope_theta == 5e5);
  BOOST_TEST((parse(j).rope.type == rope_scaling_type::none));
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 5e5}, {"factor", 4.0},
                          {"original_max_position_embeddings", 32768}};
  model_config c = parse(j);
  BOOST_TEST(c.rope_theta == 5e5);
  BOOST_TEST((c.rope.type == rope_scaling_type::yarn));
  BOOST_TEST(c.rope.factor == 4.0);
  BOOST_TEST(c.context_length() == 131072);
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_config_error(j, errc::invalid_checkpoint, "rope_parameters", "both set");
}

// Qwen's model card: add this rope_scaling to Qwen3's config.json for 131072 tokens.
BOOST_AUTO_TEST_CASE(yarn_as_qwen_publishes_it) {
  json j = golden_config("tiny-dense");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  model_config c = parse(j);
  BOOST_TEST((c.rope.type == rope_scaling_type::yarn));
  BOOST_TEST(c.rope.factor == 4.0);
  BOOST_TEST(c.rope.original_max_position_embeddings == 32768);
  BOOST_TEST(c.rope.attention_factor == 0.1 * std::log(4.0) + 1.0);  // transformers' get_mscale(4)
  BOOST_TEST(c.rope.beta_fast == 32.0);
  BOOST_TEST(c.rope.beta_slow == 1.0);
  BOOST_TEST(c.rope.truncate);
  BOOST_TEST(c.context_length() == 131072);  // as vLLM derives max_model_len
  BOOST_TEST(c.max_position_embeddings == 40960);
  // transformers 4.x spelled the key "type"; attention_factor wins over mscale.
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}, {"attention_factor", 1.25}, {"mscale", 0.5},
                       {"mscale_all_dim", 1.0}};
  c = parse(j);
  BOOST_TEST(c.rope.attention_factor == 1.25);
  BOOST_TEST(c.rope.original_max_position_embeddings == 40960);  // defaults to max_position_embeddings
  BOOST_TEST(c.context_length() == 81920);
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.5}};
  c = parse(j);
  BOOST_TEST((c.rope.type == rope_scaling_type::linear));
  BOOST_TEST(c.context_length() == 102400);
  // Written back, it parses to the same scaling (make-checkpoint and quantize write configs).
  BOOST_TEST((parse(json::parse(to_config_json(c))).rope == c.rope));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768},
                       {"beta_fast", 16}, {"truncate", false}};
  c = parse(j);
  BOOST_TEST((parse(json::parse(to_config_json(c))).rope == c.rope));
  j["rope_scaling"] = nullptr;
  BOOST_TEST((parse(j).rope.type == rope_scaling_type::none));
  BOOST_TEST(parse(j).context_length() == 40960);
}

BOOST_AUTO_TEST_CASE(bad_rope_scaling) {
  const json base = golden_config("tiny-dense");
  json j = base;
  auto with = [&](json scaling) {
    j = base;
    j["rope_scaling"] = std::move(scaling);
    return j;
  };
  expect_config_error(with({{"rope_type", "dynamic"}, {"factor", 2.0}}), errc::unsupported, "rope_scaling",
                      "\"dynamic\"");
  expect_config_error(with({{"rope_type", "llama3"}, {"factor", 8.0}}), errc::unsupported, "rope_scaling",
                      "\"llama3\"");
  expect_config_error(with({{"rope_type", "yarn"}}), errc::invalid_checkpoint, "rope_scaling.factor", "missing");
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 0.5}}), errc::invalid_checkpoint,
                      "rope_scaling.factor", ">= 1");
  expect_config_error(with({{"rope_type", "linear"}, {"factor", "2"}}), errc::invalid_checkpoint,
                      "rope_scaling.factor", "a number");
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", -1}}),
                      errc::invalid_checkpoint, "rope_scaling.original_max_position_embeddings", "positive");
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", -1.0}}),
                      errc::invalid_checkpoint, "rope_scaling.attention_factor", "positive");
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -3}}), errc::invalid_checkpoint,
                      "rope_scaling.beta_fast", "positive");
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", "no"}}), errc::invalid_checkpoint,
                      "rope_scaling.truncate", "true or false");
  // A field transformers does not list for the type is refused by name, never ignored.
  expect_config_error(with({{"rope_type", "yarn"}, {"factor", 4.0}, {"fator", 2.0}}), errc::unsupported,
                      "rope_scaling.fator", "\"yarn\"");
  expect_config_error(with({{"rope_type", "linear"}, {"factor", 2.0}, {"beta_fast", 32}}), errc::unsupported,
                      "rope_scaling.beta_fast", "\"linear\"");
  expect_config_error(with({{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}), errc::unsupported,
                      "rope_scaling.partial_rotary_factor", "");
  expect_config_error(with(4.0), errc::invalid_checkpoint, "rope_scaling", "an object");
  // --rope-scaling's text: not JSON (a number past float64 included) is refused naming the option.
  model_config c = parse(base);
  for (const char* text : {"{\"rope_type\": \"yarn\"", "{\"rope_type\": \"yarn\", \"factor\": 4e999}"})
    expect_error([&] { override_rope_scaling(c, text, "--rope-scaling"); }, errc::invalid_argument,
                 {"--rope-scaling", "is not JSON"});
}

BOOST_AUTO_TEST_CASE(unsupported_values) {
  const json base = golden_config("tiny-dense");
  json j = base;
  j["architectures"] = {"LlamaForCausalLM"};
  expect_config_error(j, errc::unsupported, "architectures", "Qwen3ForCausalLM");
  j = base;
  j["model_type"] = "qwen2";
  expect_config_error(j, errc::unsupported, "model_type", "\"qwen3\"");
  j = base;
  j["rope_scaling"] = {{"type", "longrope"}, {"factor", 2.0}};
  expect_config_error(j, errc::unsupported, "rope_scaling", "\"longrope\"");
  j = base;
  j["use_sliding_window"] = true;
  expect_config_error(j, errc::unsupported, "use_sliding_window", "expected false");
  j = base;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  expect_config_error(j, errc::unsupported, "layer_types", "full_attention");
  j = base;
  j["attention_bias"] = true;
  expect_config_error(j, errc::unsupported, "attention_bias", "expected false");
  j = base;
  j["hidden_act"] = "gelu";
  expect_config_error(j, errc::unsupported, "hidden_act", "\"silu\"");
  j = base;
  j["head_dim"] = 33;
  expect_config_error(j, errc::unsupported, "head_dim", "even");
  j = base;
  j["quantization_config"] = {{"quant_method", "fp8"}};
  expect_config_error(j, errc::unsupported, "quantization_config", "fp8");
}

BOOST_AUTO_TEST_CASE(malformed_values) {
  const json base = golden_config("tiny-dense");
  json j = base;
  j["hidden_size"] = 0;
  expect_config_error(j, errc::invalid_checkpoint, "hidden_size", "positive integer");
  j["hidden_size"] = -64;
  expect_config_error(j, errc::invalid_checkpoint, "hidden_size", "positive integer");
  j["hidden_size"] = "64";
  expect_config_error(j, errc::invalid_checkpoint, "hidden_size", "positive integer");
  j["hidden_size"] = 64.5;
  expect_config_error(j, errc::invalid_checkpoint, "hidden_size", "positive integer");
  j = base;
  j.erase("vocab_size");
  expect_config_error(j, errc::invalid_checkpoint, "vocab_size", "is missing");
  j = base;
  j["num_key_value_heads"] = 3;
  expect_config_error(j, errc::invalid_checkpoint, "num_key_value_heads", "divisor of num_attention_heads = 4");
  j = base;
  j["rms_norm_eps"] = 0;
  expect_config_error(j, errc::invalid_checkpoint, "rms_norm_eps", "positive");
  j = base;
  j["tie_word_embeddings"] = "yes";
  expect_config_error(j, errc::invalid_checkpoint, "tie_word_embeddings", "true or false");
  json m = golden_config("tiny-moe");
  m["num_experts_per_tok"] = 9;
  expect_config_error(m, errc::invalid_checkpoint, "num_experts_per_tok", "at most num_experts = 8");
  m = golden_config("tiny-moe");
  m["mlp_only_layers"] = {2};
  expect_config_error(m, errc::invalid_checkpoint, "mlp_only_layers", "[0, 2)");
  m = golden_config("tiny-moe");
  m["decoder_sparse_step"] = 0;
  expect_config_error(m, errc::invalid_checkpoint, "decoder_sparse_step", "positive integer");
  m = golden_config("tiny-moe");
  m.erase("moe_intermediate_size");
  expect_config_error(m, errc::invalid_checkpoint, "moe_intermediate_size", "is missing");
  expect_error([] { parse_model_config("{\"vocab_size\": 4", "/m/config.json"); },
               errc::invalid_checkpoint, {"/m/config.json", "not valid JSON"});
  expect_error([] { parse_model_config("[1, 2]", "/m/config.json"); }, errc::invalid_checkpoint,
               {"/m/config.json", "JSON object"});
  // A number past float64 is nlohmann's out_of_range, not a parse_error (found by
  // tools/fuzz.sh checkpoint): still this error, never an escaped exception.
  expect_error([] { parse_model_config("{\"rope_theta\": 1e99999}", "/m/config.json"); }, errc::invalid_checkpoint,
               {"/m/config.json", "not valid JSON", "number overflow"});
}

BOOST_AUTO_TEST_CASE(writer_round_trip) {
  for (const char* set : {"tiny-dense", "tiny-moe", "tiny-untied-sharded", "e2e-full-vocab"}) {
    model_config a = parse(golden_config(set));
    model_config b = parse_model_config(to_config_json(a), "/m/config.json");
    BOOST_TEST_CONTEXT(set) {
      BOOST_TEST(to_config_json(b) == to_config_json(a));
      BOOST_TEST((b.arch == a.arch));
      BOOST_TEST(b.head_dim == a.head_dim);
      BOOST_TEST(b.eos_token_ids == a.eos_token_ids);
      BOOST_TEST(b.num_experts == a.num_experts);
      BOOST_TEST(b.tie_word_embeddings == a.tie_word_embeddings);
    }
  }
}

// Qwen3ForSequenceClassification: labels from id2label (transformers' PretrainedConfig), else
// num_labels, else its default of 2; never tied; written back with its class and labels.
BOOST_AUTO_TEST_CASE(sequence_classification_configs) {
  json j = golden_config("e2e-full-vocab");  // tie_word_embeddings: true
  BOOST_TEST(parse(j).num_labels == 0);
  j["architectures"] = {"Qwen3ForSequenceClassification"};
  model_config c = parse(j);
  BOOST_TEST(c.num_labels == 2);
  BOOST_TEST(c.labels == (std::vector<std::string>{"LABEL_0", "LABEL_1"}), boost::test_tools::per_element());
  BOOST_TEST(!c.tie_word_embeddings);
  BOOST_TEST(model_class_name(c) == "Qwen3ForSequenceClassification");
  j["num_labels"] = 1;
  BOOST_TEST(parse(j).num_labels == 1);
  j["num_labels"] = 2000000000;  // never two billion names made up
  expect_config_error(j, errc::unsupported, "num_labels", "at most 65536");
  j["num_labels"] = 1;
  j["id2label"] = {{"1", "unsafe"}, {"0", "safe"}};
  expect_config_error(j, errc::invalid_checkpoint, "num_labels", "2, the number of id2label entries");
  j.erase("num_labels");
  c = parse(j);
  BOOST_TEST(c.labels == (std::vector<std::string>{"safe", "unsafe"}), boost::test_tools::per_element());
  model_config back = parse_model_config(to_config_json(c), "/m/config.json");
  BOOST_TEST(back.labels == c.labels, boost::test_tools::per_element());
  BOOST_TEST(model_class_name(back) == "Qwen3ForSequenceClassification");
  j["id2label"] = {{"0", "safe"}, {"2", "unsafe"}};
  expect_config_error(j, errc::invalid_checkpoint, "id2label", "expected the ids 0..1 once each");
  j["id2label"] = {{"0", "safe"}, {"x", "unsafe"}};
  expect_config_error(j, errc::invalid_checkpoint, "id2label", "has entry \"x\"");
  j["id2label"] = {{"0", ""}};
  expect_config_error(j, errc::invalid_checkpoint, "id2label", "each a non-empty name");
  j["id2label"] = json::array();
  expect_config_error(j, errc::invalid_checkpoint, "id2label", "an object from label ids");
  j.erase("id2label");
  j["architectures"] = {"Qwen3MoeForSequenceClassification"};
  j["model_type"] = "qwen3";
  expect_config_error(j, errc::unsupported, "model_type", "\"qwen3_moe\" for Qwen3MoeForCausalLM");
  j["architectures"] = {"Qwen3ForTokenClassification"};
  expect_config_error(j, errc::unsupported, "architectures", "ForSequenceClassification siblings");
}

BOOST_AUTO_TEST_CASE(generation_config) {
  generation_defaults g = parse_generation_config(
      test::read_file(test::golden("tiny-dense") + "/generation_config.json"), "/m/generation_config.json");
  BOOST_TEST(g.do_sample);
  BOOST_TEST(g.temperature == 0.6f);
  BOOST_TEST(g.top_p == 0.95f);
  BOOST_TEST(g.top_k == 20);
  BOOST_TEST(g.min_p == 0.0f);
  BOOST_TEST(g.repetition_penalty == 1.0f);
  BOOST_TEST(g.eos_token_ids == (std::vector<int32_t>{4095, 4094}));
  generation_defaults d = parse_generation_config("{}", "/m/generation_config.json");
  BOOST_TEST(!d.do_sample);
  BOOST_TEST(d.temperature == 1.0f);
  BOOST_TEST(d.top_k == 0);
  expect_error([] { parse_generation_config("{\"top_p\": 1.5}", "/m/generation_config.json"); },
               errc::invalid_checkpoint, {"/m/generation_config.json", "top_p", "(0, 1]"});
  expect_error([] { parse_generation_config("{\"top_k\": -1}", "/m/generation_config.json"); },
               errc::invalid_checkpoint, {"/m/generation_config.json", "top_k"});
  expect_error([] { parse_generation_config("{\"temperature\": 5E66666666}", "/m/generation_config.json"); },
               errc::invalid_checkpoint, {"/m/generation_config.json", "not valid JSON", "number overflow"});
  // The writer's text parses back to the same defaults.
  generation_defaults r = parse_generation_config(to_generation_config_json(g, 4094, 4094), "g");
  BOOST_TEST(r.temperature == g.temperature);
  BOOST_TEST(r.top_p == g.top_p);
  BOOST_TEST(r.top_k == g.top_k);
  BOOST_TEST(r.eos_token_ids == g.eos_token_ids);
  BOOST_TEST(to_generation_config_json(g, 4094, 4094).find("0.6,") != std::string::npos);
}

// vLLM's --generation-config (auto, vllm, a directory) and --override-generation-config (fields
// merged over the source's); max_new_tokens; each bad value refused naming the option and field.
BOOST_AUTO_TEST_CASE(generation_config_source_and_overrides) {
  const std::string model = test::golden("tiny-dense");
  const std::vector<int32_t> config_eos{4095};
  const auto own = resolve_generation_config(model, "auto", "", config_eos);
  BOOST_TEST(own.temperature == 0.6f);
  BOOST_TEST(own.top_k == 20);
  BOOST_TEST(own.max_new_tokens == 0);
  BOOST_TEST(own.eos_token_ids == (std::vector<int32_t>{4095, 4094}));

  const auto none = resolve_generation_config(model, "vllm", "", config_eos);  // vLLM's own defaults
  BOOST_TEST(none.do_sample);
  BOOST_TEST(none.temperature == 1.0f);
  BOOST_TEST(none.top_p == 1.0f);
  BOOST_TEST(none.top_k == 0);
  BOOST_TEST(none.eos_token_ids == config_eos);  // config.json's

  // Merged over the model's: the named fields change, the others stay.
  const auto over = resolve_generation_config(model, "auto", R"({"temperature": 0.2, "max_new_tokens": 7})", config_eos);
  BOOST_TEST(over.temperature == 0.2f);
  BOOST_TEST(over.top_k == 20);
  BOOST_TEST(over.top_p == 0.95f);
  BOOST_TEST(over.max_new_tokens == 7);
  const auto only = resolve_generation_config(model, "vllm", R"({"top_k": 5})", config_eos);
  BOOST_TEST((only.top_k == 5 && only.temperature == 1.0f && only.top_p == 1.0f));

  // Another directory's file.
  test::temp_dir d;
  test::write_file(d.path() / "generation_config.json", R"({"do_sample": true, "temperature": 0.3, "top_p": 0.5})");
  const auto other = resolve_generation_config(model, d.str(), "", config_eos);
  BOOST_TEST((other.temperature == 0.3f && other.top_p == 0.5f && other.top_k == 0));
  BOOST_TEST(other.eos_token_ids == config_eos);
  // A model without a file: auto is transformers' defaults, overrides still apply.
  test::temp_dir bare;
  const auto plain = resolve_generation_config(bare.str(), "auto", R"({"temperature": 0.4, "do_sample": true})", config_eos);
  BOOST_TEST((plain.temperature == 0.4f && plain.do_sample));

  expect_error([&] { resolve_generation_config(model, bare.str(), "", config_eos); }, errc::invalid_argument,
               {"--generation-config", "generation_config.json", "auto, vllm"});
  expect_error([&] { resolve_generation_config(model, "auto", R"({"temprature": 0.2})", config_eos); },
               errc::invalid_argument, {"--override-generation-config", "unknown field 'temprature'"});
  expect_error([&] { resolve_generation_config(model, "auto", "[1]", config_eos); }, errc::invalid_argument,
               {"--override-generation-config", "not a JSON object"});
  expect_error([&] { resolve_generation_config(model, "auto", "{", config_eos); }, errc::invalid_argument,
               {"--override-generation-config", "not a JSON object"});
  expect_error([&] { resolve_generation_config(model, "auto", R"({"top_p": 2})", config_eos); },
               errc::invalid_checkpoint, {"--override-generation-config", "top_p", "(0, 1]"});
  expect_error([&] { resolve_generation_config(model, "auto", R"({"max_new_tokens": 0})", config_eos); },
               errc::invalid_checkpoint, {"--override-generation-config", "max_new_tokens", "a positive integer"});
  test::write_file(d.path() / "generation_config.json", R"({"top_k": -3})");
  expect_error([&] { resolve_generation_config(model, d.str(), "", config_eos); }, errc::invalid_checkpoint,
               {d.str("generation_config.json"), "top_k"});
}

BOOST_AUTO_TEST_SUITE_END()
