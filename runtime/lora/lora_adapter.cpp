#include "runtime/lora/lora_adapter.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/core/fnv1a64.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"

namespace troupe {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* to_string(lora_target t) noexcept {
  switch (t) {
    case lora_target::q_proj: return "q_proj";
    case lora_target::k_proj: return "k_proj";
    case lora_target::v_proj: return "v_proj";
    case lora_target::o_proj: return "o_proj";
    case lora_target::gate_proj: return "gate_proj";
    case lora_target::up_proj: return "up_proj";
    case lora_target::down_proj: return "down_proj";
  }
  return "?";
}

std::vector<std::array<std::pair<int64_t, int64_t>, kLoraTargets>> lora_target_shapes(const model_config& cfg) {
  std::vector<std::array<std::pair<int64_t, int64_t>, kLoraTargets>> shapes(static_cast<size_t>(cfg.num_hidden_layers));
  for (const expected_tensor& t : expected_tensors(cfg)) {
    lora_target target;
    switch (t.kind) {
      case tensor_kind::q_proj: target = lora_target::q_proj; break;
      case tensor_kind::k_proj: target = lora_target::k_proj; break;
      case tensor_kind::v_proj: target = lora_target::v_proj; break;
      case tensor_kind::o_proj: target = lora_target::o_proj; break;
      case tensor_kind::gate_proj: target = lora_target::gate_proj; break;
      case tensor_kind::up_proj: target = lora_target::up_proj; break;
      case tensor_kind::down_proj: target = lora_target::down_proj; break;
      default: continue;
    }
    shapes[static_cast<size_t>(t.layer)][static_cast<size_t>(target)] = {t.shape[0], t.shape[1]};
  }
  return shapes;
}

size_t lora_adapter::bytes() const noexcept {
  size_t n = 0;
  for (const auto& layer : layers)
    for (const auto& p : layer) n += (p.a.size() + p.b.size()) * sizeof(float);
  return n;
}

int64_t lora_adapter::max_rank() const noexcept {
  int64_t r = 0;
  for (const auto& layer : layers)
    for (const auto& p : layer) r = std::max(r, p.rank);
  return r;
}

void check_lora_rank(const lora_adapter& a, int64_t max_rank, std::string_view setting) {
  if (max_rank <= 0 || a.max_rank() <= max_rank) return;
  throw_error(errc::invalid_argument, "LoRA adapter '" + a.name + "' (" + a.dir + ") has rank " +
                                          std::to_string(a.max_rank()) + ", above " + std::string(setting) + " " +
                                          std::to_string(max_rank));
}

namespace {

json read_config(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw_error(errc::io_error, "cannot read " + path.string() + " (a PEFT LoRA directory holds adapter_config.json)");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw_error(errc::invalid_checkpoint, path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// The fields that change what the adapter computes: those Troupe applies are read, the others
// must hold their no-op value or the adapter is refused (never applied half).
struct adapter_settings {
  int64_t r = 0;
  double alpha = 0;
  bool rslora = false;
};

adapter_settings read_settings(const json& c, const std::string& file) {
  auto fail = [&](errc code, const std::string& field, const std::string& why) {
    throw_error(code, file + ": " + field + " " + why);
  };
  if (!c.is_object()) throw_error(errc::invalid_checkpoint, file + ": expected a JSON object");
  if (!c.contains("peft_type")) fail(errc::invalid_checkpoint, "peft_type", "is missing (expected \"LORA\")");
  if (c["peft_type"] != "LORA")
    fail(errc::unsupported, "peft_type", "is " + c["peft_type"].dump() + "; Troupe applies \"LORA\" adapters only");
  adapter_settings s;
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1)
    fail(errc::invalid_checkpoint, "r", "must be a positive integer (got " + (c.contains("r") ? c["r"].dump() : "nothing") + ")");
  s.r = c["r"].get<int64_t>();
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number() || !std::isfinite(c["lora_alpha"].get<double>()))
    fail(errc::invalid_checkpoint, "lora_alpha",
         "must be a finite number (got " + (c.contains("lora_alpha") ? c["lora_alpha"].dump() : "nothing") + ")");
  s.alpha = c["lora_alpha"].get<double>();
  auto flag = [&](const char* field) {
    if (!c.contains(field) || c[field].is_null()) return false;
    if (!c[field].is_boolean()) fail(errc::invalid_checkpoint, field, "must be true or false (got " + c[field].dump() + ")");
    return c[field].get<bool>();
  };
  s.rslora = flag("use_rslora");
  if (flag("use_dora")) fail(errc::unsupported, "use_dora", "is true: DoRA adapters are not supported");
  if (flag("fan_in_fan_out")) fail(errc::unsupported, "fan_in_fan_out", "is true: Qwen3's projections are not Conv1D");
  if (flag("lora_bias")) fail(errc::unsupported, "lora_bias", "is true: LoRA bias terms are not supported");
  if (c.contains("bias") && !c["bias"].is_null() && c["bias"] != "none")
    fail(errc::unsupported, "bias", "is " + c["bias"].dump() + ": only \"none\" is supported");
  auto empty = [&](const char* field) {
    return !c.contains(field) || c[field].is_null() || (c[field].is_object() && c[field].empty()) ||
           (c[field].is_array() && c[field].empty());
  };
  // Variants that change what the pairs compute (activated LoRA, routing, extra modules, ...).
  // Fields of initialisation only (init_lora_weights, loftq_config, eva_config, ...) do not matter.
  for (const char* field : {"modules_to_save", "alpha_pattern", "layer_replication", "trainable_token_indices",
                            "alora_invocation_tokens", "arrow_config", "target_parameters", "use_bdlora", "kasa_config",
                            "monteclora_config", "velora_config"})
    if (!empty(field) && c[field] != false)
      fail(errc::unsupported, field, "is set (" + c[field].dump() + "); Troupe applies plain LoRA pairs only");
  if (flag("use_qalora")) fail(errc::unsupported, "use_qalora", "is true: QA-LoRA adapters are not supported");
  // rank_pattern needs nothing: each pair's rank is its tensors' and its scaling lora_alpha / that.
  return s;
}

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" -> layer 3, q_proj, A.
struct pair_name {
  int64_t layer = -1;
  lora_target target{};
  bool is_a = false;
};

bool parse_name(std::string_view name, pair_name& out) {
  for (std::string_view prefix : {"base_model.model.", ""})
    if (name.starts_with(prefix)) {
      std::string_view rest = name.substr(prefix.size());
      if (!rest.starts_with("model.layers.")) continue;
      rest.remove_prefix(13);
      const auto dot = rest.find('.');
      if (dot == std::string_view::npos || dot == 0) return false;
      int64_t layer = 0;
      auto [p, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
      if (ec != std::errc{} || p != rest.data() + dot) return false;
      rest.remove_prefix(dot + 1);
      static constexpr std::pair<std::string_view, lora_target> kNames[] = {
          {"self_attn.q_proj.", lora_target::q_proj}, {"self_attn.k_proj.", lora_target::k_proj},
          {"self_attn.v_proj.", lora_target::v_proj}, {"self_attn.o_proj.", lora_target::o_proj},
          {"mlp.gate_proj.", lora_target::gate_proj}, {"mlp.up_proj.", lora_target::up_proj},
          {"mlp.down_proj.", lora_target::down_proj}};
      for (const auto& [module, target] : kNames)
        if (rest.starts_with(module)) {
          rest.remove_prefix(module.size());
          if (rest != "lora_A.weight" && rest != "lora_B.weight") return false;
          out = {layer, target, rest == "lora_A.weight"};
          return true;
        }
      return false;
    }
  return false;
}

}  // namespace

lora_adapter load_lora_adapter(const std::string& dir, const model_config& cfg, std::string name) {
  const fs::path root(dir);
  const std::string config_file = (root / "adapter_config.json").string();
  const adapter_settings s = read_settings(read_config(config_file), config_file);
  const std::string tensors_file = (root / "adapter_model.safetensors").string();
  if (!fs::exists(tensors_file))
    throw_error(errc::io_error, "cannot read " + tensors_file +
                                    (fs::exists(root / "adapter_model.bin")
                                         ? " (adapter_model.bin is a pickle; save the adapter with safe_serialization)"
                                         : ""));
  safetensors_file file(tensors_file);  // mapped: the pairs are widened into float32 below

  lora_adapter a;
  a.dir = dir;
  a.name = name.empty() ? directory_name(dir) : std::move(name);
  a.r = s.r;
  a.lora_alpha = s.alpha;
  a.use_rslora = s.rslora;
  a.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));

  const auto shapes = lora_target_shapes(cfg);
  auto bad = [&](const tensor_info& t, errc code, const std::string& why) {
    throw_error(code, tensors_file + ": tensor '" + t.name + "' " + why);
  };
  for (const tensor_info& t : file.tensors()) {
    pair_name pn;
    if (!parse_name(t.name, pn))
      bad(t, errc::unsupported,
          "is not the lora_A / lora_B weight of a layer's q/k/v/o_proj or gate/up/down_proj: Troupe applies LoRA to "
          "those projections only (not to embeddings, lm_head, biases, DoRA magnitudes or MoE experts)");
    if (pn.layer < 0 || pn.layer >= cfg.num_hidden_layers)
      bad(t, errc::invalid_checkpoint, "names layer " + std::to_string(pn.layer) + "; the model has " +
                                           std::to_string(cfg.num_hidden_layers) + " layers");
    const auto [out, in] = shapes[static_cast<size_t>(pn.layer)][static_cast<size_t>(pn.target)];
    if (out == 0)  // no dense projection there: the MLP of a mixture-of-experts layer
      bad(t, errc::unsupported, "targets the MLP of layer " + std::to_string(pn.layer) +
                                    ", a mixture-of-experts layer: LoRA on experts is not supported");
    if (t.type != dtype::f32 && t.type != dtype::bf16 && t.type != dtype::f16)
      bad(t, errc::unsupported, "has dtype " + std::string(to_string(t.type)) + "; expected F32, BF16 or F16");
    if (t.shape.size() != 2 || t.shape[0] < 1 || t.shape[1] < 1)
      bad(t, errc::invalid_checkpoint, "has shape " + shape_string(t.shape) + "; expected a matrix");
    lora_pair& p = a.layers[static_cast<size_t>(pn.layer)][static_cast<size_t>(pn.target)];
    const int64_t rank = pn.is_a ? t.shape[0] : t.shape[1];
    const std::vector<int64_t> expected = pn.is_a ? std::vector<int64_t>{rank, in} : std::vector<int64_t>{out, rank};
    if (t.shape != expected)
      bad(t, errc::invalid_checkpoint, "has shape " + shape_string(t.shape) + "; expected " + shape_string(expected) +
                                           " for this model's " + to_string(pn.target) + " (" + std::to_string(out) +
                                           " x " + std::to_string(in) + ")");
    if (p.rank != 0 && p.rank != rank)
      bad(t, errc::invalid_checkpoint, "has rank " + std::to_string(rank) + " but its pair's other matrix has rank " +
                                           std::to_string(p.rank));
    p.rank = rank, p.in = in, p.out = out;
    (pn.is_a ? p.a : p.b) = widen_to_f32(t);
  }

  fnv1a64 h;
  h.str("troupe-lora-v1");
  h.f64(s.alpha);
  h.u64(s.rslora);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l)
    for (int ti = 0; ti < kLoraTargets; ++ti) {
      lora_pair& p = a.layers[static_cast<size_t>(l)][static_cast<size_t>(ti)];
      if (p.rank == 0) continue;
      const std::string where = "model.layers." + std::to_string(l) + "." + to_string(static_cast<lora_target>(ti));
      if (p.a.empty() || p.b.empty())
        throw_error(errc::invalid_checkpoint, tensors_file + ": " + where + " has lora_" + (p.a.empty() ? "B" : "A") +
                                                  " but no lora_" + (p.a.empty() ? "A" : "B"));
      p.scaling = static_cast<float>(s.rslora ? s.alpha / std::sqrt(static_cast<double>(p.rank))
                                              : s.alpha / static_cast<double>(p.rank));
      ++a.pairs;
      h.i64(l), h.i64(ti), h.i64(p.rank), h.f64(p.scaling);
      h.bytes(p.a.data(), p.a.size() * sizeof(float));
      h.bytes(p.b.data(), p.b.size() * sizeof(float));
    }
  if (a.pairs == 0) throw_error(errc::invalid_checkpoint, tensors_file + ": holds no lora_A / lora_B weights");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  a.identity = hex;
  return a;
}

}  // namespace troupe
