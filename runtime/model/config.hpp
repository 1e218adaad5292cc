// The model shape as config.json states it (Qwen3ForCausalLM / Qwen3MoeForCausalLM) and the
// default sampling of generation_config.json. Nothing about the shape is hard-coded elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

enum class architecture { qwen3, qwen3_moe };

// RoPE scaling from config.json's rope_scaling (transformers 4.x) or rope_parameters (5.x), as
// transformers' modeling_rope_utils computes it. Static: the frequencies do not depend on the
// sequence length, so every token of a cached prefix keeps its rotation (why "dynamic" is refused).
enum class rope_scaling_type { none, linear, yarn };

struct rope_scaling {
  rope_scaling_type type = rope_scaling_type::none;
  double factor = 1.0;                       // context extension (linear, yarn)
  int64_t original_max_position_embeddings = 0;  // yarn: pretraining context
  double attention_factor = 1.0;             // yarn: multiplies cos and sin (resolved from mscale)
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn: the ramp between extrapolated and interpolated
  bool truncate = true;                      // yarn: round the ramp's ends to whole dimensions

  bool operator==(const rope_scaling&) const = default;
};

const char* rope_scaling_name(rope_scaling_type type) noexcept;

struct model_config {
  architecture arch = architecture::qwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;      // dense MLP width (also MoE layers listed in mlp_only_layers)
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;               // from config; need not equal hidden / heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  rope_scaling rope;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::vector<int32_t> eos_token_ids;  // from config.json eos_token_id (int or list)
  int32_t bos_token_id = -1;
  std::string torch_dtype;            // informative ("bfloat16")
  // MoE (arch == qwen3_moe)
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // Qwen3ForSequenceClassification / Qwen3MoeForSequenceClassification (transformers'): a `score`
  // head of num_labels rows stands where lm_head would (never tied), its outputs one logit per
  // label, named by id2label in order. 0: a causal LM.
  int64_t num_labels = 0;
  std::vector<std::string> labels;

  // True when layer `layer` uses experts (transformers' Qwen3MoeDecoderLayer rule).
  bool layer_is_moe(int64_t layer) const;
  // The longest sequence (prompt + output) the model serves, as vLLM derives it: with YaRN the
  // pretraining context times the factor (Qwen3: 32768 x 4 = 131072), with linear scaling
  // max_position_embeddings times the factor, else max_position_embeddings.
  int64_t context_length() const;
};

// Defaults a request falls back to when it does not set them (generation_config.json).
struct generation_defaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;           // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  bool do_sample = false;      // false -> greedy unless a request asks otherwise
  std::vector<int32_t> eos_token_ids;
  // max_new_tokens: a cap on every request's output tokens, as vLLM reads it; 0 = none.
  int32_t max_new_tokens = 0;
  // A request's max_tokens under that cap.
  int32_t capped(int32_t max_tokens) const noexcept {
    return max_new_tokens > 0 && max_new_tokens < max_tokens ? max_new_tokens : max_tokens;
  }
};

// Parse and validate; throws troupe::error(invalid_checkpoint / unsupported) naming the file,
// the field and what was expected.
// Fields follow transformers' Qwen3Config / Qwen3MoeConfig, including their defaults for absent
// optional fields (e.g. a dense config without head_dim gets 128, a MoE one hidden / heads).
model_config parse_model_config(const std::string& json_text, const std::string& path);
generation_defaults parse_generation_config(const std::string& json_text, const std::string& path);

// Replaces config.json's RoPE scaling with `json_text`: an object as config.json's rope_scaling
// takes ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}), or
// null for none; what vLLM's --rope-scaling does. Errors name `source` (the option) and the field.
void override_rope_scaling(model_config& config, const std::string& json_text, const std::string& source);

// "Qwen3ForCausalLM" / "Qwen3MoeForCausalLM" and "qwen3" / "qwen3_moe".
const char* architecture_name(architecture arch) noexcept;
// The transformers class config.json names: architecture_name, or its ForSequenceClassification
// sibling when num_labels > 0.
std::string model_class_name(const model_config& c);

// The most labels a classifier's config may have (more is no classifier's head).
inline constexpr int64_t max_num_labels = int64_t{1} << 16;
// Makes `c` a sequence classifier of num_labels labels named as transformers names them by
// default (LABEL_0, LABEL_1, ...): its score head replaces lm_head and is never tied.
void make_classifier(model_config& c, int64_t num_labels);
const char* model_type_name(architecture arch) noexcept;

// config.json / generation_config.json text as transformers writes them (sorted keys, 2-space
// indent); parse_model_config(to_config_json(c)) == c for every field model_config holds.
std::string to_config_json(const model_config& config);
// pad_token_id < 0 is left out.
std::string to_generation_config_json(const generation_defaults& gen, int32_t bos_token_id,
                                      int32_t pad_token_id);

}  // namespace troupe
