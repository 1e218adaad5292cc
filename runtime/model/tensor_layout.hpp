// The tensors a Qwen3 / Qwen3-MoE checkpoint holds, derived from its config alone: names exactly as
// transformers writes them and shapes the config implies. The loader checks a checkpoint against
// this list; the random-checkpoint writer produces it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/checkpoint.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

enum class tensor_kind {
  embed_tokens, lm_head, final_norm,
  q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, input_layernorm, post_attention_layernorm,
  gate_proj, up_proj, down_proj,                  // dense MLP
  router, expert_gate_proj, expert_up_proj, expert_down_proj,  // MoE
};

struct expected_tensor {
  std::string name;            // "model.layers.3.mlp.experts.5.up_proj.weight"
  tensor_kind kind;
  std::vector<int64_t> shape;  // [out, in] for linear weights, [n] for norms
  int64_t layer = -1;          // -1 outside the layers
  int64_t expert = -1;         // -1 outside the experts
  bool is_norm() const noexcept;
};

// In a fixed order: embed_tokens, each layer (attention, norms, MLP or router + experts),
// model.norm, lm_head (untied only). Expects a validated config.
std::vector<expected_tensor> expected_tensors(const model_config& config);

// Where a tensor lives in model_weights: exactly one of the two is non-null (norm or not).
kernels::weight_ref* weight_slot(model_weights& w, const expected_tensor& t);
std::vector<float>* norm_slot(model_weights& w, const expected_tensor& t);
const kernels::weight_ref* weight_slot(const model_weights& w, const expected_tensor& t);
const std::vector<float>* norm_slot(const model_weights& w, const expected_tensor& t);

// Sizes model_weights' vectors for `config` (layers, experts), leaving every slot empty.
void shape_weights(model_weights& w, const model_config& config);

}  // namespace troupe
