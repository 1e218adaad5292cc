// Writes config.json / generation_config.json the way transformers does (sorted keys, indent 2),
// for random-weight checkpoints; the result parses back to the same model_config.
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "runtime/model/config.hpp"

namespace troupe {

using json = nlohmann::json;

namespace {
json ids_json(const std::vector<int32_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}
// 0.6f would print as 0.6000000238418579: keep the shortest decimal a human wrote.
double tidy(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(f));
  return std::strtod(buf, nullptr);
}
// Every field explicit (attention_factor resolved), so it parses back to the same values.
json rope_scaling_json(const rope_scaling& s) {
  if (s.type == rope_scaling_type::none) return nullptr;
  json r;
  r["rope_type"] = rope_scaling_name(s.type);
  r["factor"] = s.factor;
  if (s.type == rope_scaling_type::yarn) {
    r["original_max_position_embeddings"] = s.original_max_position_embeddings;
    r["attention_factor"] = s.attention_factor;
    r["beta_fast"] = s.beta_fast;
    r["beta_slow"] = s.beta_slow;
    r["truncate"] = s.truncate;
  }
  return r;
}
}  // namespace

std::string to_config_json(const model_config& c) {
  json j;
  j["architectures"] = json::array({model_class_name(c)});
  if (c.num_labels > 0) {
    json ids = json::object(), labels = json::object();
    for (size_t i = 0; i < c.labels.size(); ++i) {
      ids[std::to_string(i)] = c.labels[i];
      labels[c.labels[i]] = static_cast<int64_t>(i);
    }
    j["id2label"] = ids;
    j["label2id"] = labels;
  }
  j["model_type"] = model_type_name(c.arch);
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  j["eos_token_id"] = ids_json(c.eos_token_ids);
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["max_window_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_scaling"] = rope_scaling_json(c.rope);
  j["rope_theta"] = c.rope_theta;
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = c.torch_dtype.empty() ? json(nullptr) : json(c.torch_dtype);
  j["transformers_version"] = "4.51.0";
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab_size;
  if (c.arch == architecture::qwen3_moe) {
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.001;
  }
  return j.dump(2) + "\n";
}

std::string to_generation_config_json(const generation_defaults& g, int32_t bos_token_id,
                                      int32_t pad_token_id) {
  json j;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (pad_token_id >= 0) j["pad_token_id"] = pad_token_id;
  j["do_sample"] = g.do_sample;
  j["eos_token_id"] = ids_json(g.eos_token_ids);
  j["temperature"] = tidy(g.temperature);
  j["top_k"] = g.top_k;
  j["top_p"] = tidy(g.top_p);
  if (g.min_p != 0.0f) j["min_p"] = tidy(g.min_p);
  if (g.repetition_penalty != 1.0f) j["repetition_penalty"] = tidy(g.repetition_penalty);
  j["transformers_version"] = "4.51.0";
  return j.dump(2) + "\n";
}

}  // namespace troupe
