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
  // What `bytes` counts: every tensor the forward pass reads, at its stored size (norms at their
  // widened float32 size), lm_head once (= embed_tokens when tied), all experts of MoE layers;
  // the embedding table of an untied model is left out (a token reads one row of it).
  // active_bytes is the same for one token of a MoE model: router + num_experts_per_tok experts
  // per MoE layer instead of all of them (= bytes for a dense model).
  size_t active_bytes = 0;
  int64_t num_parameters = 0;        // elements of every tensor loaded (embed + lm_head once if tied)
};

struct checkpoint {
  std::string dir;
  model_config config;
  generation_defaults generation;
  model_weights weights;
  std::vector<mapped_file> files;  // keeps the weights' memory alive
  // Tensors whose offset in the file is not a multiple of their element size are copied here
  // (never the case for files written by the reference safetensors library or by Troupe).
  std::vector<std::vector<uint64_t>> aligned_copies;
  // Other memory weights point into: weights quantized on load, widened scales (runtime/quant).
  std::vector<std::shared_ptr<const void>> owned;
  // How the weights were stored when that is not how they run, for banners: "GPTQ 8-bit" runs as
  // INT8 codes, "GPTQ 4-bit" / "AWQ 4-bit" as u4 (runtime/quant/packed_int.hpp); empty otherwise.
  std::string stored_as;
  // A bare Qwen3Model export with untied embeddings (Qwen3-Embedding-8B) carries no lm_head: it
  // loads for embeddings only. weights.lm_head then views embed_tokens so that every shape holds,
  // and the runner refuses to compute logits with it (model_runner::step).
  bool no_lm_head = false;
};

// Loads DIR/config.json, DIR/generation_config.json (optional), and DIR/model.safetensors or the
// shards listed in DIR/model.safetensors.index.json. Every tensor the architecture needs must be
// present with the shape the config implies; unexpected tensors are an error too.
// Throws troupe::error naming the file, the tensor and what was expected.
// Error codes: invalid_checkpoint (missing/unexpected tensor, wrong shape, corrupt or truncated
// file, missing config.json or shard), unsupported (architecture, config value, dtype), io_error.
// Maps the files without reading them (only headers and norm weights are touched), unless `where`
// asks for a copy on huge pages (runtime/core/mapped_file.hpp).
std::unique_ptr<checkpoint> load_checkpoint(const std::string& dir, residency where = residency::mapped);

// A model or adapter directory's own name, trailing separators ignored ("models/Qwen3-0.6B/" ->
// "Qwen3-0.6B"): what the server calls it when no name is given.
std::string directory_name(const std::string& dir);

// Recomputes weights.bytes, active_bytes and num_parameters by model_weights' rules, quantization
// scales counted with their weights (load_checkpoint calls it; so does runtime/quant after
// quantizing).
void account_weight_bytes(checkpoint& ckpt);

// A stable name for the exact model a checkpoint holds, for keys shared between processes
// (prefix-cache entries in Redis): "<model_type>-v<vocab>-h<hidden>-l<layers>-a<heads>x<kv>x<head_dim>
// -i<inter>[-e<experts>x<top_k>x<moe_inter>]-<dtype>-<hash>", hash = 16 hex digits of FNV-1a 64
// (version "troupe-fingerprint-v1") over the config values that change the computation and,
// per tensor, its name, dtype, shape and sampled bytes (docs/checkpoints.md). No ':' or spaces.
// Fixed algorithm, no per-process seed: every replica computes the same string. Reads a few
// bytes of every tensor (a few hundred pages for a 0.6B model).
std::string model_fingerprint(const checkpoint& ckpt);

}  // namespace troupe
