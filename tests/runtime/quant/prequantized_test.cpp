// Quantized checkpoints on disk: what `troupe quantize` writes (Troupe INT8, Qwen FP8, field by
// field), that loading it quantizes nothing again and gives bit-identical logits and the same
// fingerprint as quantizing on load, and one test per bad quantization config or tensor, each
// asserting the error code and the field or tensor named.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/quant/quant_config.hpp"
#include "runtime/quant/write.hpp"
#include "tests/runtime/engine/golden.hpp"
#include "tests/runtime/quant/checkpoint_edits.hpp"
#include "tests/runtime/quant/test_util.hpp"

using namespace troupe;
using namespace troupe::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

void write_quantized(const std::string& set, quant::method m, const std::string& out) {
  quant::load_options o;
  o.quantization = m;
  o.release_source_pages = false;
  auto ck = load_checkpoint(golden_dir(set));
  quant::quantize_weights(*ck, o);
  quant::write_quantized_checkpoint(*ck, golden_dir(set), out);
}

}  // namespace

BOOST_AUTO_TEST_CASE(int8_checkpoint_layout_and_reload) {
  temp_dir dir("int8_layout");
  write_quantized("tiny-dense", quant::method::int8, dir.str("q"));
  const json cfg = read_json(dir.path / "q" / "config.json");
  BOOST_TEST(cfg["quantization_config"] == json::parse(R"({"quant_method": "troupe_int8", "bits": 8, "symmetric": true,
      "group_size": 128, "scale_dtype": "float32", "activation_scheme": "dynamic"})"));
  BOOST_TEST(cfg["tie_word_embeddings"] == false);  // lm_head is now a quantized copy of embed_tokens
  BOOST_TEST(fs::exists(dir.path / "q" / "generation_config.json"));
  safetensors_file f(dir.str("q/model.safetensors"));
  const tensor_info* q = f.find("model.layers.1.mlp.down_proj.weight");
  const tensor_info* s = f.find("model.layers.1.mlp.down_proj.weight_scale");
  BOOST_REQUIRE(q && s);
  BOOST_TEST(to_string(q->type) == "I8");
  BOOST_TEST(shape_string(q->shape) == "[64, 160]");
  BOOST_TEST(to_string(s->type) == "F32");
  BOOST_TEST(shape_string(s->shape) == "[64, 2]");  // 160 columns in groups of 128
  BOOST_TEST(shape_string(f.find("lm_head.weight_scale")->shape) == "[4096, 1]");
  BOOST_TEST(to_string(f.find("model.embed_tokens.weight")->type) == "BF16");
  BOOST_TEST(to_string(f.find("model.norm.weight")->type) == "BF16");

  // Loading it quantizes nothing: codes and scales are used in place from the mapping.
  quant::load_options o;
  o.quantization = quant::method::int8;
  auto on_load = quant::load_model(golden_dir("tiny-dense"), o);
  auto stored = quant::load_model(dir.str("q"));
  BOOST_TEST(stored->owned.empty());
  BOOST_TEST(stored->weights.bytes == on_load->weights.bytes);
  BOOST_TEST(model_fingerprint(*stored) == model_fingerprint(*on_load));
  BOOST_TEST(model_fingerprint(*stored).find("-mixed-") != std::string::npos);
  BOOST_TEST(model_fingerprint(*stored) != model_fingerprint(*load_checkpoint(golden_dir("tiny-dense"))));
  // Quantized outputs depend on this CPU's arithmetic for them; a float model's do not.
  BOOST_TEST(quant::kernel_arithmetic(*stored) == std::string("int8-") + kernels::quant_arithmetic());
  BOOST_TEST(quant::kernel_arithmetic(*load_checkpoint(golden_dir("tiny-dense"))) == "");
  const auto prompt = load_golden("tiny-dense").back().prompt;
  const auto a = generator(*stored).prompt_logits(prompt), b = generator(*on_load).prompt_logits(prompt);
  BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  // The same method again is a no-op; another one is refused.
  BOOST_TEST(quant::load_model(dir.str("q"), o)->owned.empty());
  o.quantization = quant::method::fp8;
  expect_error([&] { quant::load_model(dir.str("q"), o); }, errc::invalid_argument,
               {"already quantized (int8)", "--quantization fp8"});
}

BOOST_AUTO_TEST_CASE(fp8_checkpoint_is_qwens_format) {
  temp_dir dir("fp8_layout");
  write_quantized("tiny-moe", quant::method::fp8, dir.str("q"));
  const json cfg = read_json(dir.path / "q" / "config.json");
  BOOST_TEST(cfg["quantization_config"] == json::parse(R"({"quant_method": "fp8", "fmt": "e4m3",
      "activation_scheme": "dynamic", "weight_block_size": [128, 128]})"));
  safetensors_file f(dir.str("q/model.safetensors"));
  const tensor_info* q = f.find("model.layers.0.mlp.experts.7.up_proj.weight");
  const tensor_info* s = f.find("model.layers.0.mlp.experts.7.up_proj.weight_scale_inv");
  BOOST_REQUIRE(q && s);
  BOOST_TEST(to_string(q->type) == "F8_E4M3");
  BOOST_TEST(to_string(s->type) == "F32");
  BOOST_TEST(shape_string(s->shape) == "[1, 1]");  // [ceil(48 / 128), ceil(64 / 128)]
  // As Qwen publishes: lm_head, embeddings, norms and MoE routers stay BF16, with no scales.
  for (const char* name : {"lm_head.weight", "model.embed_tokens.weight", "model.layers.1.mlp.gate.weight"}) {
    BOOST_TEST(to_string(f.find(name)->type) == "BF16", name);
    BOOST_TEST(!f.find(std::string(name) + "_scale_inv"), name);
  }
  auto stored = quant::load_model(dir.str("q"));
  BOOST_TEST(to_string(stored->weights.layers[1].experts[2].down_proj.type) == "F8_E4M3");
  BOOST_TEST(stored->weights.layers[1].experts[2].down_proj.group_rows == 128);
  quant::load_options o;
  o.quantization = quant::method::fp8;
  auto on_load = quant::load_model(golden_dir("tiny-moe"), o);
  BOOST_TEST(model_fingerprint(*stored) == model_fingerprint(*on_load));
  BOOST_TEST(quant::kernel_arithmetic(*stored) == std::string("fp8-") + kernels::quant_arithmetic());
  const auto prompt = load_golden("tiny-moe").back().prompt;
  const auto a = generator(*stored).prompt_logits(prompt), b = generator(*on_load).prompt_logits(prompt);
  BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(bad_quantization_configs_name_the_field) {
  temp_dir dir("bad_config");
  write_quantized("tiny-dense", quant::method::fp8, dir.str("fp8"));
  write_quantized("tiny-dense", quant::method::int8, dir.str("int8"));
  int n = 0;
  auto with_config = [&](const std::string& base, const std::function<void(json&)>& edit) {
    const fs::path d = dir.path / ("case" + std::to_string(n++));
    copy_dir(dir.path / base, d);
    json j = read_json(d / "config.json");
    edit(j);
    write_json(d / "config.json", j);
    return d.string();
  };
  auto q = [](json& j) -> json& { return j["quantization_config"]; };
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j)["quant_method"] = "bitsandbytes"; })); },
               errc::unsupported, {"config.json", "'quantization_config.quant_method' is \"bitsandbytes\"", "\"gptq\"", "\"awq\""});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j).erase("quant_method"); })); },
               errc::invalid_checkpoint, {"'quantization_config.quant_method' is missing"});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j)["fmt"] = "e5m2"; })); },
               errc::unsupported, {"'quantization_config.fmt' is \"e5m2\"", "expected \"e4m3\""});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j)["activation_scheme"] = "static"; })); },
               errc::unsupported, {"'quantization_config.activation_scheme' is \"static\""});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j).erase("weight_block_size"); })); },
               errc::unsupported, {"'quantization_config.weight_block_size' is missing"});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j)["weight_block_size"] = {128}; })); },
               errc::invalid_checkpoint, {"'quantization_config.weight_block_size' is [128]"});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { q(j)["weight_block_size"] = {128, 100}; })); },
               errc::unsupported, {"'quantization_config.weight_block_size' is [128,100]", "multiple of 16"});
  expect_error([&] { quant::load_model(with_config("fp8", [&](json& j) { j["quantization_config"] = "fp8"; })); },
               errc::invalid_checkpoint, {"'quantization_config' is \"fp8\"; expected an object"});
  expect_error([&] { quant::load_model(with_config("int8", [&](json& j) { q(j)["group_size"] = 48; })); },
               errc::unsupported, {"'quantization_config.group_size' is 48", "power of two"});
  expect_error([&] { quant::load_model(with_config("int8", [&](json& j) { q(j)["bits"] = 4; })); },
               errc::unsupported, {"'quantization_config.bits' is 4"});
  expect_error([&] { quant::load_model(with_config("int8", [&](json& j) { q(j)["symmetric"] = false; })); },
               errc::unsupported, {"'quantization_config.symmetric' is false"});
  // A group size that does not match the stored scales is a wrong scale shape.
  expect_error([&] { quant::load_model(with_config("int8", [&](json& j) { q(j)["group_size"] = 32; })); },
               errc::invalid_checkpoint, {"weight_scale' has shape [128, 1]", "expected F32 (or BF16 / F16) with shape [128, 2]"});
  // Plain load_checkpoint still refuses quantized checkpoints (they load through load_model).
  expect_error([&] { load_checkpoint(dir.str("fp8")); }, errc::unsupported, {"quantization_config"});
  // The field's own parser on text that is not JSON (a number past float64 is nlohmann's
  // out_of_range, not a parse_error).
  expect_error([] { quant::parse_quant_config(R"({"quant_method": "fp8", "weight_block_size": [1e999, 128]})", "/m/config.json"); },
               errc::invalid_checkpoint, {"/m/config.json", "'quantization_config' is not valid JSON", "number overflow"});
}

BOOST_AUTO_TEST_CASE(bad_quantized_tensors_name_the_tensor) {
  temp_dir dir("bad_tensors");
  write_quantized("tiny-dense", quant::method::fp8, dir.str("fp8"));
  int n = 0;
  auto with_tensors = [&](const std::function<void(tensor_list&)>& edit) {
    const fs::path d = dir.path / ("case" + std::to_string(n++));
    copy_dir(dir.path / "fp8", d);
    edit_tensors(d, [&](tensor_list& ts, tensor_bytes&) { edit(ts); });
    return d.string();
  };
  auto& find = find_tensor;
  const std::string w = "model.layers.0.self_attn.q_proj.weight";
  expect_error([&] { quant::load_model(with_tensors([&](auto& ts) { std::erase_if(ts, [&](auto& t) { return t.name == w + "_scale_inv"; }); })); },
               errc::invalid_checkpoint, {"missing tensor '" + w + "_scale_inv'", "block scales of '" + w + "'"});
  static std::vector<float> scales(4, 1.0f);
  expect_error([&] { quant::load_model(with_tensors([&](auto& ts) { find(ts, w + "_scale_inv") = {w + "_scale_inv", dtype::f32, {2, 2}, scales.data(), {}}; })); },
               errc::invalid_checkpoint, {"tensor '" + w + "_scale_inv' has shape [2, 2]", "shape [1, 1]"});
  expect_error([&] { quant::load_model(with_tensors([&](auto& ts) { find(ts, w).type = dtype::i8; })); },
               errc::unsupported, {"tensor '" + w + "' has dtype I8 but quantization_config names fp8"});
  static std::vector<uint8_t> codes(4096 * 64, 0x38);
  expect_error([&] { quant::load_model(with_tensors([&](auto& ts) {
                 find(ts, "model.embed_tokens.weight") = {"model.embed_tokens.weight", dtype::f8_e4m3, {4096, 64}, codes.data(), {}};
                 ts.push_back({"model.embed_tokens.weight_scale_inv", dtype::f32, {32, 1}, scales.data(), {}});
               })); },
               errc::unsupported, {"'model.embed_tokens.weight' is quantized", "embedding tables must stay"});
  expect_error([&] { quant::load_model(with_tensors([&](auto& ts) { ts.push_back({"model.norm.weight_scale_inv", dtype::f32, {1, 1}, scales.data(), {}}); })); },
               errc::invalid_checkpoint, {"unexpected tensor 'model.norm.weight_scale_inv'"});
  // No safetensors at all: the same message as load_checkpoint's (one open_weights for both).
  const fs::path bin = dir.path / "bin";
  copy_dir(dir.path / "fp8", bin);
  fs::remove(bin / "model.safetensors");
  std::ofstream(bin / "pytorch_model.bin") << "not read";
  expect_error([&] { quant::load_model(bin.string()); }, errc::invalid_checkpoint,
               {"no model.safetensors", "pytorch_model.bin checkpoints are not supported"});
  // A config.json that is not JSON (a number past float64 here) gets load_checkpoint's message
  // from load_model too, not an escaped parser exception.
  const fs::path big = dir.path / "big";
  copy_dir(dir.path / "fp8", big);
  std::ofstream(big / "config.json") << "{\"rope_theta\": 1e99999}";
  expect_error([&] { quant::load_model(big.string()); }, errc::invalid_checkpoint,
               {(big / "config.json").string(), "not valid JSON"});
}

BOOST_AUTO_TEST_CASE(huge_page_residency_gives_the_same_model) {
  // --no-mmap reads every file into 2 MB pages and puts quantized copies there too. The logits must
  // be bit-identical to the mapped model's, for a float model, a pre-quantized one and one
  // quantized on load whose tied embedding table (read again for every token) was the source of
  // the quantized lm_head: its pages must not be released as a file mapping's are.
  temp_dir dir("huge_pages");
  write_quantized("tiny-dense", quant::method::int8, dir.str("q"));
  const auto prompt = load_golden("tiny-dense").back().prompt;
  quant::load_options mapped, huge;
  huge.weights = residency::huge_pages;
  for (auto m : {quant::method::none, quant::method::int8, quant::method::fp8}) {
    mapped.quantization = huge.quantization = m;
    auto a = quant::load_model(golden_dir("tiny-dense"), mapped);
    auto b = quant::load_model(golden_dir("tiny-dense"), huge);
    BOOST_TEST(b->files.size() == a->files.size());
    for (const auto& f : b->files) BOOST_TEST(f.is_copy());
    const auto la = generator(*a).prompt_logits(prompt), lb = generator(*b).prompt_logits(prompt);
    BOOST_TEST(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0, quant::method_name(m));
  }
  huge.quantization = quant::method::none;
  auto a = quant::load_model(dir.str("q")), b = quant::load_model(dir.str("q"), huge);
  BOOST_TEST(b->owned.empty());  // pre-quantized codes are used in place in the copy
  const auto la = generator(*a).prompt_logits(prompt), lb = generator(*b).prompt_logits(prompt);
  BOOST_TEST(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
}
