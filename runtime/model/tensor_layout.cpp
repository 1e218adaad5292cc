// Names and shapes of a Qwen3 checkpoint's tensors, and where each lands in model_weights.
#include "runtime/model/tensor_layout.hpp"

namespace troupe {

bool expected_tensor::is_norm() const noexcept {
  switch (kind) {
    case tensor_kind::final_norm: case tensor_kind::q_norm: case tensor_kind::k_norm:
    case tensor_kind::input_layernorm: case tensor_kind::post_attention_layernorm:
      return true;
    default:
      return false;
  }
}

std::vector<expected_tensor> expected_tensors(const model_config& c) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  std::vector<expected_tensor> out;
  auto add = [&](std::string name, tensor_kind kind, std::vector<int64_t> shape, int64_t layer = -1,
                 int64_t expert = -1) {
    out.push_back({std::move(name), kind, std::move(shape), layer, expert});
  };
  add("model.embed_tokens.weight", tensor_kind::embed_tokens, {c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", tensor_kind::q_proj, {c.num_attention_heads * d, h}, l);
    add(p + "self_attn.k_proj.weight", tensor_kind::k_proj, {c.num_key_value_heads * d, h}, l);
    add(p + "self_attn.v_proj.weight", tensor_kind::v_proj, {c.num_key_value_heads * d, h}, l);
    add(p + "self_attn.o_proj.weight", tensor_kind::o_proj, {h, c.num_attention_heads * d}, l);
    add(p + "self_attn.q_norm.weight", tensor_kind::q_norm, {d}, l);
    add(p + "self_attn.k_norm.weight", tensor_kind::k_norm, {d}, l);
    add(p + "input_layernorm.weight", tensor_kind::input_layernorm, {h}, l);
    add(p + "post_attention_layernorm.weight", tensor_kind::post_attention_layernorm, {h}, l);
    if (c.layer_is_moe(l)) {
      const int64_t m = c.moe_intermediate_size;
      add(p + "mlp.gate.weight", tensor_kind::router, {c.num_experts, h}, l);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
        add(q + "gate_proj.weight", tensor_kind::expert_gate_proj, {m, h}, l, e);
        add(q + "up_proj.weight", tensor_kind::expert_up_proj, {m, h}, l, e);
        add(q + "down_proj.weight", tensor_kind::expert_down_proj, {h, m}, l, e);
      }
    } else {
      const int64_t i = c.intermediate_size;
      add(p + "mlp.gate_proj.weight", tensor_kind::gate_proj, {i, h}, l);
      add(p + "mlp.up_proj.weight", tensor_kind::up_proj, {i, h}, l);
      add(p + "mlp.down_proj.weight", tensor_kind::down_proj, {h, i}, l);
    }
  }
  add("model.norm.weight", tensor_kind::final_norm, {h});
  if (c.num_labels > 0)
    add("score.weight", tensor_kind::lm_head, {c.num_labels, h});  // a classifier's head, read as lm_head
  else if (!c.tie_word_embeddings)
    add("lm_head.weight", tensor_kind::lm_head, {c.vocab_size, h});
  return out;
}

const kernels::weight_ref* weight_slot(const model_weights& w, const expected_tensor& t) {
  return weight_slot(const_cast<model_weights&>(w), t);
}

const std::vector<float>* norm_slot(const model_weights& w, const expected_tensor& t) {
  return norm_slot(const_cast<model_weights&>(w), t);
}

kernels::weight_ref* weight_slot(model_weights& w, const expected_tensor& t) {
  auto layer = [&]() -> layer_weights& { return w.layers.at(static_cast<size_t>(t.layer)); };
  auto expert = [&]() -> expert_weights& { return layer().experts.at(static_cast<size_t>(t.expert)); };
  switch (t.kind) {
    case tensor_kind::embed_tokens: return &w.embed_tokens;
    case tensor_kind::lm_head: return &w.lm_head;
    case tensor_kind::q_proj: return &layer().q_proj;
    case tensor_kind::k_proj: return &layer().k_proj;
    case tensor_kind::v_proj: return &layer().v_proj;
    case tensor_kind::o_proj: return &layer().o_proj;
    case tensor_kind::gate_proj: return &layer().gate_proj;
    case tensor_kind::up_proj: return &layer().up_proj;
    case tensor_kind::down_proj: return &layer().down_proj;
    case tensor_kind::router: return &layer().router;
    case tensor_kind::expert_gate_proj: return &expert().gate_proj;
    case tensor_kind::expert_up_proj: return &expert().up_proj;
    case tensor_kind::expert_down_proj: return &expert().down_proj;
    default: return nullptr;
  }
}

std::vector<float>* norm_slot(model_weights& w, const expected_tensor& t) {
  auto layer = [&]() -> layer_weights& { return w.layers.at(static_cast<size_t>(t.layer)); };
  switch (t.kind) {
    case tensor_kind::final_norm: return &w.norm;
    case tensor_kind::q_norm: return &layer().q_norm;
    case tensor_kind::k_norm: return &layer().k_norm;
    case tensor_kind::input_layernorm: return &layer().input_layernorm;
    case tensor_kind::post_attention_layernorm: return &layer().post_attention_layernorm;
    default: return nullptr;
  }
}

void shape_weights(model_weights& w, const model_config& c) {
  w = model_weights{};
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_is_moe(l)) w.layers[static_cast<size_t>(l)].experts.resize(static_cast<size_t>(c.num_experts));
}

}  // namespace troupe
