// Parses and validates config.json and generation_config.json. Every rejection names the file,
// the field, the value found and the value expected; nothing outside this file guesses a shape.
#include "runtime/model/config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"

namespace troupe {

using json = nlohmann::json;

namespace {

// Largest size any single dimension may have: keeps every product of two dimensions in int64.
constexpr int64_t max_dim = int64_t{1} << 31;

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Field access over one parsed JSON object; every failure names path and field.
class fields {
 public:
  // `prefix` names a nested object in errors ("rope_scaling." + "factor").
  fields(const json& j, const std::string& path, std::string prefix = "")
      : j_(j), path_(path), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(errc code, const std::string& field, const std::string& what) const {
    throw_error(code, path_ + ": field '" + prefix_ + field + "' " + what);
  }
  [[noreturn]] void bad_value(errc code, const std::string& field, const json& v,
                              const std::string& expected) const {
    fail(code, field, "is " + show(v) + "; expected " + expected);
  }

  // nullptr when absent or JSON null.
  const json* get(const std::string& field) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  static bool is_integral(const json& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15;
  }

  int64_t to_int(const std::string& field, const json& v, const std::string& expected) const {
    if (!is_integral(v)) bad_value(errc::invalid_checkpoint, field, v, expected);
    return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
  }

  // A required positive integer (a model dimension).
  int64_t size(const std::string& field) const {
    const json* v = get(field);
    if (!v) fail(errc::invalid_checkpoint, field, "is missing; expected a positive integer");
    return positive(field, *v);
  }
  int64_t size_or(const std::string& field, int64_t fallback) const {
    const json* v = get(field);
    return v ? positive(field, *v) : fallback;
  }
  int64_t positive(const std::string& field, const json& v) const {
    int64_t n = to_int(field, v, "a positive integer");
    if (n <= 0 || n > max_dim)
      bad_value(errc::invalid_checkpoint, field, v, "a positive integer below 2^31");
    return n;
  }

  double number_or(const std::string& field, double fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      bad_value(errc::invalid_checkpoint, field, *v, "a number");
    return v->get<double>();
  }

  bool boolean_or(const std::string& field, bool fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_boolean()) bad_value(errc::invalid_checkpoint, field, *v, "true or false");
    return v->get<bool>();
  }

  std::string string_or(const std::string& field, const std::string& fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_string()) bad_value(errc::invalid_checkpoint, field, *v, "a string");
    return v->get<std::string>();
  }

  // A token id (int) or a list of them; absent or null gives an empty list.
  std::vector<int32_t> token_ids(const std::string& field) const {
    std::vector<int32_t> ids;
    const json* v = get(field);
    if (!v) return ids;
    const std::string expected = "a token id or a list of token ids (non-negative integers)";
    auto one = [&](const json& e) {
      int64_t id = to_int(field, e, expected);
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        bad_value(errc::invalid_checkpoint, field, *v, expected);
      ids.push_back(static_cast<int32_t>(id));
    };
    if (v->is_array()) {
      for (const auto& e : *v) one(e);
    } else {
      one(*v);
    }
    return ids;
  }

  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  const std::string& path_;
  std::string prefix_;
};

json parse_object(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw_error(errc::invalid_checkpoint, path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object())
    throw_error(errc::invalid_checkpoint, path + ": expected a JSON object at the top level");
  return j;
}

// `classifier`: the class is a ForSequenceClassification one (parse_labels reads its head).
architecture parse_architecture(const fields& f, bool& classifier) {
  const std::string expected =
      "[\"Qwen3ForCausalLM\"] or [\"Qwen3MoeForCausalLM\"] (or their ForSequenceClassification siblings)";
  std::optional<architecture> arch;
  classifier = false;
  if (const json* a = f.get("architectures")) {
    if (!a->is_array() || a->empty())
      f.bad_value(errc::invalid_checkpoint, "architectures", *a, expected);
    for (const auto& name : *a) {
      if (!name.is_string()) f.bad_value(errc::invalid_checkpoint, "architectures", *a, expected);
      if (name == "Qwen3ForCausalLM" || name == "Qwen3ForSequenceClassification") arch = architecture::qwen3;
      if (name == "Qwen3MoeForCausalLM" || name == "Qwen3MoeForSequenceClassification") arch = architecture::qwen3_moe;
      classifier = name == "Qwen3ForSequenceClassification" || name == "Qwen3MoeForSequenceClassification";
      if (arch) break;
    }
    if (!arch) f.bad_value(errc::unsupported, "architectures", *a, expected);
  }
  std::string model_type = f.string_or("model_type", "");
  if (!arch) {
    // transformers reads model_type when architectures is absent (AutoModelForCausalLM).
    if (model_type == "qwen3") return architecture::qwen3;
    if (model_type == "qwen3_moe") return architecture::qwen3_moe;
    if (model_type.empty())
      f.fail(errc::invalid_checkpoint, "architectures",
             "is missing (and so is model_type); expected " + expected);
    f.bad_value(errc::unsupported, "model_type", model_type, "\"qwen3\" or \"qwen3_moe\"");
  }
  if (!model_type.empty() && model_type != model_type_name(*arch))
    f.bad_value(errc::unsupported, "model_type", model_type,
                std::string("\"") + model_type_name(*arch) + "\" for " + architecture_name(*arch));
  return *arch;
}

void parse_rope(const fields& f, model_config& c);

// A classifier's labels, as transformers' PretrainedConfig stores them: id2label ({"0": name, ...},
// every id from 0 once), else num_labels (names LABEL_i), else its default of 2.
void parse_labels(const fields& f, model_config& c) {
  const json* ids = f.get("id2label");
  const json* n = f.get("num_labels");
  // Never num_labels names made out of nothing for an absurd count.
  if (n && f.positive("num_labels", *n) > max_num_labels)
    f.bad_value(errc::unsupported, "num_labels", *n, "at most " + std::to_string(max_num_labels));
  if (!ids) {
    make_classifier(c, n ? f.positive("num_labels", *n) : 2);
    return;
  }
  if (!ids->is_object() || ids->empty())
    f.bad_value(errc::invalid_checkpoint, "id2label", *ids, "an object from label ids (\"0\", \"1\", ...) to names");
  if (static_cast<int64_t>(ids->size()) > max_num_labels)
    f.fail(errc::unsupported, "id2label", "has " + std::to_string(ids->size()) + " labels; at most " +
                                              std::to_string(max_num_labels) + " are served");
  make_classifier(c, static_cast<int64_t>(ids->size()));
  std::vector<std::string> names(static_cast<size_t>(c.num_labels));  // "" until its id is read
  for (const auto& [key, name] : ids->items()) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
    }
    if (used != key.size() || id < 0 || id >= c.num_labels || !names[static_cast<size_t>(id)].empty() ||
        !name.is_string() || name.get<std::string>().empty())
      f.fail(errc::invalid_checkpoint, "id2label",
             "has entry \"" + key + "\": " + show(name) + "; expected the ids 0.." + std::to_string(c.num_labels - 1) +
                 " once each, each a non-empty name");
    names[static_cast<size_t>(id)] = name.get<std::string>();
  }
  c.labels = std::move(names);
  if (n && f.positive("num_labels", *n) != c.num_labels)
    f.bad_value(errc::invalid_checkpoint, "num_labels", *n,
                std::to_string(c.num_labels) + ", the number of id2label entries");
}

// Rejects what the forward pass does not implement: each would silently give wrong logits.
void check_unsupported(const fields& f, model_config& c) {
  std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu") f.bad_value(errc::unsupported, "hidden_act", act, "\"silu\"");
  if (f.boolean_or("attention_bias", false))
    f.bad_value(errc::unsupported, "attention_bias", true, "false (no attention bias)");
  if (f.boolean_or("use_sliding_window", false))
    f.bad_value(errc::unsupported, "use_sliding_window", true,
                "false (sliding-window attention is not implemented)");
  if (const json* lt = f.get("layer_types")) {
    if (!lt->is_array()) f.bad_value(errc::invalid_checkpoint, "layer_types", *lt, "a list");
    for (const auto& t : *lt)
      if (t != "full_attention")
        f.bad_value(errc::unsupported, "layer_types", t, "\"full_attention\" for every layer");
  }
  if (const json* q = f.get("quantization_config")) {
    std::string method = q->is_object() ? q->value("quant_method", std::string("?")) : "?";
    f.fail(errc::unsupported, "quantization_config",
           "names quant_method \"" + method +
               "\"; expected no quantization_config (pre-quantized checkpoints are unsupported)");
  }
  parse_rope(f, c);
}

double yarn_mscale(double factor, double mscale) {  // transformers' get_mscale
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// One rope_scaling / rope_parameters object (`name` is its field), into c.rope and c.rope_theta.
// Keys follow transformers' validators; a key it does not list for the type is refused by name,
// since ignoring it could silently change every logit.
void parse_rope_object(const fields& top, const std::string& name, const json& r, model_config& c) {
  if (!r.is_object()) top.bad_value(errc::invalid_checkpoint, name, r, "an object or null");
  const fields f(r, top.path(), name + ".");
  std::string type = f.string_or("rope_type", f.string_or("type", "default"));
  rope_scaling& s = c.rope;
  s = rope_scaling{};
  std::vector<std::string> keys = {"rope_type", "type", "rope_theta"};
  if (type == "default") {
    s.type = rope_scaling_type::none;
  } else if (type == "linear" || type == "yarn") {
    s.type = type == "linear" ? rope_scaling_type::linear : rope_scaling_type::yarn;
    if (!f.get("factor")) f.fail(errc::invalid_checkpoint, "factor", "is missing; expected a number >= 1");
    s.factor = f.number_or("factor", 1.0);
    if (!(s.factor >= 1.0)) f.bad_value(errc::invalid_checkpoint, "factor", r["factor"], "a number >= 1");
    keys.push_back("factor");
  } else {
    top.fail(errc::unsupported, name,
             "has type \"" + type +
                 "\", which is unsupported; expected \"default\", \"linear\" or \"yarn\" (\"dynamic\" "
                 "rescales by sequence length, which a shared KV cache cannot follow)");
  }
  if (s.type == rope_scaling_type::yarn) {
    keys.insert(keys.end(), {"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                             "mscale", "mscale_all_dim", "truncate"});
    s.original_max_position_embeddings =
        f.size_or("original_max_position_embeddings", c.max_position_embeddings);
    const double mscale = f.number_or("mscale", 0.0), mscale_all_dim = f.number_or("mscale_all_dim", 0.0);
    if (const json* a = f.get("attention_factor")) {
      s.attention_factor = f.number_or("attention_factor", 1.0);
      if (!(s.attention_factor > 0)) f.bad_value(errc::invalid_checkpoint, "attention_factor", *a, "a positive number");
    } else if (mscale != 0 && mscale_all_dim != 0) {
      s.attention_factor = yarn_mscale(s.factor, mscale) / yarn_mscale(s.factor, mscale_all_dim);
    } else {
      s.attention_factor = yarn_mscale(s.factor, 1.0);
    }
    // NOTE: transformers reads `get("beta_fast") or 32`: an explicit 0 also means the default.
    s.beta_fast = f.number_or("beta_fast", 0.0);
    if (s.beta_fast == 0) s.beta_fast = 32.0;
    s.beta_slow = f.number_or("beta_slow", 0.0);
    if (s.beta_slow == 0) s.beta_slow = 1.0;
    if (!(s.beta_fast > 0 && s.beta_slow > 0))
      f.fail(errc::invalid_checkpoint, "beta_fast",
             "and beta_slow are " + std::to_string(s.beta_fast) + " and " + std::to_string(s.beta_slow) +
                 "; expected positive numbers of rotations");
    s.truncate = f.boolean_or("truncate", true);
  }
  for (const auto& [key, value] : r.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end() && !value.is_null())
      f.fail(errc::unsupported, key,
             "is not a field of rope type \"" + type + "\" that Troupe implements; remove it or report it");
  if (const json* t = f.get("rope_theta")) {
    if (!t->is_number()) f.bad_value(errc::invalid_checkpoint, "rope_theta", *t, "a number");
    c.rope_theta = t->get<double>();
  }
}

// RoPE: transformers <= 4.x writes rope_theta + rope_scaling; 5.x writes rope_parameters (with
// rope_theta inside). Either may carry the scaling.
void parse_rope(const fields& f, model_config& c) {
  c.rope_theta = f.number_or("rope_theta", 10000.0);
  c.rope = rope_scaling{};
  if (const json* rs = f.get("rope_scaling")) parse_rope_object(f, "rope_scaling", *rs, c);
  if (const json* rp = f.get("rope_parameters")) {
    if (c.rope.type != rope_scaling_type::none)
      f.fail(errc::invalid_checkpoint, "rope_parameters",
             "and rope_scaling are both set; expected one of them (transformers 5 writes rope_parameters)");
    parse_rope_object(f, "rope_parameters", *rp, c);
  }
  if (!(c.rope_theta > 0))
    f.bad_value(errc::invalid_checkpoint, "rope_theta", c.rope_theta, "a positive number");
}

void parse_moe(const fields& f, model_config& c) {
  c.num_experts = 0;
  if (const json* v = f.get("num_experts")) {
    c.num_experts = f.to_int("num_experts", *v, "a non-negative integer");
    if (c.num_experts < 0 || c.num_experts > max_dim)
      f.bad_value(errc::invalid_checkpoint, "num_experts", *v, "a non-negative integer");
  } else {
    f.fail(errc::invalid_checkpoint, "num_experts", "is missing; expected a positive integer");
  }
  c.decoder_sparse_step = f.size_or("decoder_sparse_step", 1);
  c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
  c.mlp_only_layers.clear();
  if (const json* m = f.get("mlp_only_layers")) {
    const std::string expected =
        "a list of layer indices in [0, " + std::to_string(c.num_hidden_layers) + ")";
    if (!m->is_array()) f.bad_value(errc::invalid_checkpoint, "mlp_only_layers", *m, expected);
    for (const auto& e : *m) {
      int64_t layer = f.to_int("mlp_only_layers", e, expected);
      if (layer < 0 || layer >= c.num_hidden_layers)
        f.bad_value(errc::invalid_checkpoint, "mlp_only_layers", e, expected);
      c.mlp_only_layers.push_back(layer);
    }
  }
  if (c.num_experts > 0) {
    c.num_experts_per_tok = f.size("num_experts_per_tok");
    if (c.num_experts_per_tok > c.num_experts)
      f.bad_value(errc::invalid_checkpoint, "num_experts_per_tok", c.num_experts_per_tok,
                  "at most num_experts = " + std::to_string(c.num_experts));
    c.moe_intermediate_size = f.size("moe_intermediate_size");
  }
}

}  // namespace

const char* architecture_name(architecture arch) noexcept {
  return arch == architecture::qwen3_moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM";
}

std::string model_class_name(const model_config& c) {
  if (c.num_labels == 0) return architecture_name(c.arch);
  return c.arch == architecture::qwen3_moe ? "Qwen3MoeForSequenceClassification" : "Qwen3ForSequenceClassification";
}

void make_classifier(model_config& c, int64_t num_labels) {
  c.num_labels = num_labels;
  c.labels.clear();
  for (int64_t i = 0; i < num_labels; ++i) c.labels.push_back("LABEL_" + std::to_string(i));
  c.tie_word_embeddings = false;
}

const char* model_type_name(architecture arch) noexcept {
  return arch == architecture::qwen3_moe ? "qwen3_moe" : "qwen3";
}

void override_rope_scaling(model_config& c, const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception&) {
    throw_error(errc::invalid_argument,
                source + ": '" + json_text +
                    "' is not JSON; expected an object such as {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                    "\"original_max_position_embeddings\": 32768}, or null");
  }
  const json top = {{"rope_scaling", j}};
  const fields f(top, source);
  c.rope = rope_scaling{};
  if (!j.is_null()) parse_rope_object(f, "rope_scaling", j, c);
  if (!(c.rope_theta > 0)) f.bad_value(errc::invalid_argument, "rope_scaling.rope_theta", c.rope_theta, "a positive number");
}

const char* rope_scaling_name(rope_scaling_type type) noexcept {
  switch (type) {
    case rope_scaling_type::linear: return "linear";
    case rope_scaling_type::yarn: return "yarn";
    default: return "default";
  }
}

int64_t model_config::context_length() const {
  switch (rope.type) {
    case rope_scaling_type::linear:
      return static_cast<int64_t>(static_cast<double>(max_position_embeddings) * rope.factor);
    case rope_scaling_type::yarn:
      return static_cast<int64_t>(static_cast<double>(rope.original_max_position_embeddings) * rope.factor);
    default: return max_position_embeddings;
  }
}

bool model_config::layer_is_moe(int64_t layer) const {
  if (arch != architecture::qwen3_moe || num_experts <= 0 || decoder_sparse_step <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

model_config parse_model_config(const std::string& json_text, const std::string& path) {
  json j = parse_object(json_text, path);
  fields f(j, path);
  model_config c;
  bool classifier = false;
  c.arch = parse_architecture(f, classifier);

  c.vocab_size = f.size("vocab_size");
  c.hidden_size = f.size("hidden_size");
  c.num_hidden_layers = f.size("num_hidden_layers");
  c.num_attention_heads = f.size("num_attention_heads");
  c.num_key_value_heads = f.size_or("num_key_value_heads", c.num_attention_heads);
  // NOTE: transformers' Qwen3Config declares head_dim = 128 as its default, so a dense config
  // without head_dim gets 128; Qwen3MoeConfig has no such field and the model falls back to
  // hidden_size / num_attention_heads. We follow both exactly.
  if (f.get("head_dim")) {
    c.head_dim = f.size("head_dim");
  } else if (c.arch == architecture::qwen3) {
    c.head_dim = 128;
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
    if (c.head_dim <= 0)
      f.fail(errc::invalid_checkpoint, "head_dim",
             "is missing and hidden_size / num_attention_heads is 0; expected a positive integer");
  }
  if (c.num_key_value_heads > c.num_attention_heads ||
      c.num_attention_heads % c.num_key_value_heads != 0)
    f.bad_value(errc::invalid_checkpoint, "num_key_value_heads", c.num_key_value_heads,
                "a divisor of num_attention_heads = " + std::to_string(c.num_attention_heads));
  if (c.head_dim % 2 != 0)
    f.bad_value(errc::unsupported, "head_dim", c.head_dim, "an even number (RoPE rotates halves)");
  if (c.vocab_size > std::numeric_limits<int32_t>::max())
    f.bad_value(errc::unsupported, "vocab_size", c.vocab_size, "a value below 2^31 (token ids are int32)");

  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0))
    f.bad_value(errc::invalid_checkpoint, "rms_norm_eps", c.rms_norm_eps, "a positive number");
  c.max_position_embeddings = f.size_or("max_position_embeddings", 32768);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  if (classifier) parse_labels(f, c);  // (tie_word_embeddings ties lm_head, which a classifier has not)
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", ""));
  check_unsupported(f, c);

  if (c.arch == architecture::qwen3_moe) parse_moe(f, c);
  bool any_dense = false;
  for (int64_t l = 0; l < c.num_hidden_layers && !any_dense; ++l) any_dense = !c.layer_is_moe(l);
  if (any_dense) {
    c.intermediate_size = f.size("intermediate_size");
  } else {
    c.intermediate_size = f.get("intermediate_size") ? f.size("intermediate_size") : 0;
  }

  c.eos_token_ids = f.token_ids("eos_token_id");
  std::vector<int32_t> bos = f.token_ids("bos_token_id");
  if (bos.size() > 1)
    f.bad_value(errc::invalid_checkpoint, "bos_token_id", j["bos_token_id"], "a single token id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  auto check_id = [&](const char* field, int32_t id) {
    if (id >= c.vocab_size)
      f.bad_value(errc::invalid_checkpoint, field, id,
                  "a token id below vocab_size = " + std::to_string(c.vocab_size));
  };
  for (int32_t id : c.eos_token_ids) check_id("eos_token_id", id);
  if (c.bos_token_id >= 0) check_id("bos_token_id", c.bos_token_id);
  return c;
}

generation_defaults parse_generation_config(const std::string& json_text, const std::string& path) {
  json j = parse_object(json_text, path);
  fields f(j, path);
  generation_defaults g;
  g.do_sample = f.boolean_or("do_sample", false);
  g.temperature = static_cast<float>(f.number_or("temperature", 1.0));
  if (!(g.temperature >= 0))
    f.bad_value(errc::invalid_checkpoint, "temperature", g.temperature, "a number >= 0");
  g.top_p = static_cast<float>(f.number_or("top_p", 1.0));
  if (!(g.top_p > 0 && g.top_p <= 1))
    f.bad_value(errc::invalid_checkpoint, "top_p", g.top_p, "a number in (0, 1]");
  if (const json* k = f.get("top_k")) {
    int64_t top_k = f.to_int("top_k", *k, "a non-negative integer");
    if (top_k < 0 || top_k > std::numeric_limits<int32_t>::max())
      f.bad_value(errc::invalid_checkpoint, "top_k", *k, "a non-negative integer");
    g.top_k = static_cast<int32_t>(top_k);
  }
  g.min_p = static_cast<float>(f.number_or("min_p", 0.0));
  if (!(g.min_p >= 0 && g.min_p <= 1))
    f.bad_value(errc::invalid_checkpoint, "min_p", g.min_p, "a number in [0, 1]");
  g.repetition_penalty = static_cast<float>(f.number_or("repetition_penalty", 1.0));
  if (!(g.repetition_penalty > 0))
    f.bad_value(errc::invalid_checkpoint, "repetition_penalty", g.repetition_penalty,
                "a positive number");
  g.eos_token_ids = f.token_ids("eos_token_id");
  if (const json* n = f.get("max_new_tokens")) {
    const int64_t v = f.to_int("max_new_tokens", *n, "a positive integer");
    if (v < 1 || v > std::numeric_limits<int32_t>::max())
      f.bad_value(errc::invalid_checkpoint, "max_new_tokens", *n, "a positive integer");
    g.max_new_tokens = static_cast<int32_t>(v);
  }
  return g;
}

}  // namespace troupe
