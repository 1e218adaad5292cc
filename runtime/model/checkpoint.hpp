// A loaded Hugging Face Qwen3 checkpoint: config, generation defaults and weights that point
// into memory-mapped safetensors files. Owns the mappings; weights are valid while it lives.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/core/mapped_file.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

struct expert_weights {
  kernels::weight_ref gate_proj, up_proj, down_proj;  // [moe_inter, hidden], same, [hidden, moe_inter]
};

struct layer_weights {
  kernels::weight_ref q_proj;  // [heads * head_dim, hidden]
  kernels::weight_ref k_proj;  // [kv_heads * head_dim, hidden]
  kernels::weight_ref v_proj;  // [kv_heads * head_dim, hidden]
  kernels::weight_ref o_proj;  // [hidden, heads * head_dim]
  // Norm weights are tiny: widened to float32 once at load.
  std::vector<float> q_norm, k_norm;                       // [head_dim]
  std::vector<float> input_layernorm, post_attention_layernorm;  // [hidden]
  // Dense MLP (when !config.layer_is_moe(layer))
  kernels::weight_ref gate_proj, up_proj, down_proj;  // [inter, hidden], same, [hidden, inter]
  // MoE (when config.layer_is_moe(layer))
  kernels::weight_ref router;  // mlp.gate.weight [num_experts, hidden]
  std::vector<expert_weights> experts;
};

struct model_weights {
  kernels::weight_ref embed_tokens;  // [vocab, hidden]
  kernels::weight_ref lm_head;       // [vocab, hidden]; = embed_tokens when tied
  std::vector<float> norm;           // [hidden]
  std::vector<layer_weights> layers;
  size_t bytes = 0;                  // bytes of all tensors used (weights read per token ~ this)
};

struct checkpoint {
  std::string dir;
  model_config config;
  generation_defaults generation;
  model_weights weights;
  std::vector<mapped_file> files;  // keeps the weights' memory alive
};

// Loads DIR/config.json, DIR/generation_config.json (optional), and DIR/model.safetensors or the
// shards listed in DIR/model.safetensors.index.json. Every tensor the architecture needs must be
// present with the shape the config implies; unexpected tensors are an error too.
// Throws troupe::error naming the file, the tensor and what was expected.
std::unique_ptr<checkpoint> load_checkpoint(const std::string& dir);

}  // namespace troupe
