// Parses and writes quantization_config; every rejection names the file, the field, the value
// found and what Troupe expects.
#include "runtime/quant/quant_config.hpp"

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"

namespace troupe::quant {

using json = nlohmann::json;

namespace {

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

[[noreturn]] void bad(errc code, const std::string& path, const std::string& field, const json& v,
                      const std::string& expected) {
  throw_error(code, path + ": field 'quantization_config." + field + "' is " + show(v) + "; expected " + expected);
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int64_t integer(const std::string& path, const std::string& field, const json& v, const std::string& expected) {
  if (!v.is_number_integer()) bad(errc::invalid_checkpoint, path, field, v, expected);
  return v.get<int64_t>();
}

// The input columns per scale of INT8-like schemes: `field` (required) holds -1 (one scale per
// output channel, returned as 0) or a power of two in [32, 4096]; `per` names what it scales.
int32_t group_size_field(const json& j, const std::string& path, const char* field, const std::string& per) {
  const std::string expected = "a power of two in [32, 4096], or -1 for one scale per output channel";
  if (!j.contains(field))
    throw_error(errc::invalid_checkpoint, path + ": field 'quantization_config." + field +
                                              "' is missing; expected the input columns per " + per + " (" + expected + ")");
  const int64_t g = integer(path, field, j[field], expected);
  if (g != -1 && !(is_pow2(g) && g >= 32 && g <= 4096)) bad(errc::unsupported, path, field, j[field], expected);
  return g == -1 ? 0 : static_cast<int32_t>(g);
}

// GPTQ as AutoGPTQ, GPTQModel and optimum write it. Fields that only describe how the weights were
// found (damp_percent, true_sequential, dataset, ...) do not change what they compute and are
// ignored; every field that would is checked.
quant_config parse_gptq(const json& j, const std::string& path) {
  quant_config c;
  c.kind = method::int8;
  c.source = int8_source::gptq;
  if (!j.contains("bits"))
    throw_error(errc::invalid_checkpoint, path + ": field 'quantization_config.bits' is missing; expected 4 or 8");
  const int64_t bits = integer(path, "bits", j["bits"], "4 or 8");
  if (bits != 4 && bits != 8) bad(errc::unsupported, path, "bits", j["bits"], "4 or 8 (2- and 3-bit GPTQ are not supported)");
  c.bits = static_cast<int32_t>(bits);
  c.group_size = group_size_field(j, path, "group_size", "scale");
  if (j.contains("sym") && !j["sym"].is_boolean()) bad(errc::invalid_checkpoint, path, "sym", j["sym"], "true or false");
  if (j.contains("desc_act") && !j["desc_act"].is_boolean())
    bad(errc::invalid_checkpoint, path, "desc_act", j["desc_act"], "true or false");
  if (j.contains("lm_head") && j["lm_head"] != false)
    bad(errc::unsupported, path, "lm_head", j["lm_head"], "false (a GPTQ-quantized lm_head is not supported)");
  if (j.contains("dynamic") && !j["dynamic"].is_null() && !j["dynamic"].empty())
    bad(errc::unsupported, path, "dynamic", j["dynamic"], "null (per-module GPTQ overrides are not supported)");
  const char* format_field = j.contains("checkpoint_format") ? "checkpoint_format" : "format";
  if (j.contains(format_field)) {
    const json& f = j[format_field];
    if (f == "gptq_v2") c.gptq_v1 = false;
    else if (f != "gptq")
      bad(errc::unsupported, path, format_field, f, "\"gptq\" or \"gptq_v2\" (repacked kernel layouts such as "
                                                     "marlin are not supported)");
  }
  if (j.contains("pack_dtype") && j["pack_dtype"] != "int32")
    bad(errc::unsupported, path, "pack_dtype", j["pack_dtype"], "\"int32\"");
  return c;
}

// AWQ as AutoAWQ writes it (and transformers' AwqConfig describes it): 4-bit codes with zero points
// in the GEMM layout. modules_to_not_convert needs nothing: those layers are stored as float weights.
quant_config parse_awq(const json& j, const std::string& path) {
  quant_config c;
  c.kind = method::int8;
  c.source = int8_source::awq;
  c.bits = 4;
  c.gptq_v1 = false;
  const char* bits_field = j.contains("bits") ? "bits" : "w_bit";
  if (!j.contains(bits_field))
    throw_error(errc::invalid_checkpoint, path + ": field 'quantization_config.bits' is missing; expected 4");
  if (integer(path, bits_field, j[bits_field], "4") != 4) bad(errc::unsupported, path, bits_field, j[bits_field], "4");
  c.group_size = group_size_field(j, path, j.contains("group_size") ? "group_size" : "q_group_size", "scale");
  if (j.contains("zero_point") && j["zero_point"] != true)
    bad(errc::unsupported, path, "zero_point", j["zero_point"], "true (AWQ without zero points is not supported)");
  if (j.contains("version") && !(j["version"].is_string() && (j["version"] == "gemm" || j["version"] == "GEMM")))
    bad(errc::unsupported, path, "version", j["version"],
        "\"gemm\" (the GEMV, GEMV-fast, Marlin and ExLlama layouts are not supported)");
  return c;
}

}  // namespace

const char* method_name(method m) noexcept {
  switch (m) {
    case method::int8: return "int8";
    case method::fp8: return "fp8";
    default: return "none";
  }
}

method parse_method(std::string_view text, std::string_view what) {
  if (text == "none" || text.empty()) return method::none;
  if (text == "int8") return method::int8;
  if (text == "fp8") return method::fp8;
  throw_error(errc::invalid_argument,
              std::string(what) + ": '" + std::string(text) + "' is not a quantization method; expected none, int8 or fp8");
}

quant_config parse_quant_config(const std::string& json_text, const std::string& path) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw_error(errc::invalid_checkpoint, path + ": field 'quantization_config' is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object())
    throw_error(errc::invalid_checkpoint, path + ": field 'quantization_config' is " + show(j) + "; expected an object");
  if (!j.contains("quant_method"))
    throw_error(errc::invalid_checkpoint,
                path + ": field 'quantization_config.quant_method' is missing; expected \"fp8\" or \"troupe_int8\"");
  const json& m = j["quant_method"];
  quant_config c;
  if (m == "fp8") {
    c.kind = method::fp8;
    if (j.contains("fmt") && j["fmt"] != "e4m3")
      bad(errc::unsupported, path, "fmt", j["fmt"], "\"e4m3\" (FP8 E4M3 weights)");
    if (j.contains("activation_scheme") && j["activation_scheme"] != "dynamic")
      bad(errc::unsupported, path, "activation_scheme", j["activation_scheme"],
          "\"dynamic\" (static activation scales are not supported)");
    if (!j.contains("weight_block_size") || j["weight_block_size"].is_null())
      throw_error(errc::unsupported, path + ": field 'quantization_config.weight_block_size' is missing; expected "
                                            "[rows, cols] of the weight_scale_inv blocks, e.g. [128, 128] (per-tensor "
                                            "FP8 scales are not supported)");
    const json& b = j["weight_block_size"];
    const std::string expected = "[rows, cols]: two positive integers, cols a multiple of 16, e.g. [128, 128]";
    if (!b.is_array() || b.size() != 2) bad(errc::invalid_checkpoint, path, "weight_block_size", b, expected);
    const int64_t r = integer(path, "weight_block_size", b[0], expected);
    const int64_t k = integer(path, "weight_block_size", b[1], expected);
    if (r <= 0 || k <= 0 || r > 65536 || k > 65536) bad(errc::invalid_checkpoint, path, "weight_block_size", b, expected);
    if (k % 16 != 0) bad(errc::unsupported, path, "weight_block_size", b, expected);
    c.block_rows = static_cast<int32_t>(r);
    c.block_cols = static_cast<int32_t>(k);
    return c;
  }
  if (m == "troupe_int8") {
    c.kind = method::int8;
    if (j.contains("bits") && j["bits"] != 8) bad(errc::unsupported, path, "bits", j["bits"], "8");
    if (j.contains("symmetric") && j["symmetric"] != true)
      bad(errc::unsupported, path, "symmetric", j["symmetric"], "true (asymmetric INT8 is not supported)");
    c.group_size = group_size_field(j, path, "group_size", "weight_scale");
    return c;
  }
  if (m == "gptq") return parse_gptq(j, path);
  if (m == "awq") return parse_awq(j, path);
  bad(errc::unsupported, path, "quant_method", m,
      "\"fp8\" (Qwen's block-wise FP8), \"gptq\" (4- or 8-bit GPTQ), \"awq\" (4-bit AWQ, GEMM layout) or "
      "\"troupe_int8\" (written by troupe quantize --method int8)");
}

std::string to_json(const quant_config& c) {
  json j;
  if (c.kind == method::fp8) {
    j = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
         {"weight_block_size", {c.block_rows, c.block_cols}}};
  } else if (c.kind == method::int8) {
    j = {{"quant_method", "troupe_int8"}, {"bits", 8}, {"symmetric", true},
         {"group_size", c.group_size == 0 ? -1 : c.group_size}, {"scale_dtype", "float32"},
         {"activation_scheme", "dynamic"}};
  }
  return j.dump();
}

std::string scale_tensor_name(const std::string& weight_name, method m) {
  return weight_name + (m == method::fp8 ? "_scale_inv" : "_scale");
}

}  // namespace troupe::quant
