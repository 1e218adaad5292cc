// The safetensors files of a Hugging Face checkpoint directory: model.safetensors, or the shards
// model.safetensors.index.json names. load_checkpoint, the quantized loader and the quantize
// command's writer all open a directory's weights through it, so they refuse the same things with
// the same messages.
#pragma once

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/model/safetensors.hpp"

namespace troupe {

struct weight_files {
  std::vector<safetensors_file> files;
  std::unordered_map<std::string, size_t> placement;  // sharded only: tensor -> files[i]
  std::string index_path;                             // empty when single-file
  // A bare Qwen3Model export (how Qwen3-Embedding is published): its tensors are named without
  // the "model." prefix ("embed_tokens.weight", "layers.0. ...", "norm.weight").
  bool bare_model = false;

  // The tensor `name` (nullptr when absent); file_path names where it is (or was looked for).
  // Names are Qwen3ForCausalLM's ("model.layers.0. ..."), in a bare export too.
  const tensor_info* find(const std::string& name, std::string& file_path) const;
  // A stored tensor's Qwen3ForCausalLM name: "model." + stored in a bare export.
  std::string causal_lm_name(const std::string& stored) const { return bare_model ? "model." + stored : stored; }
  // What the files call a Qwen3ForCausalLM tensor (for messages): without "model." in a bare export.
  std::string stored_name(const std::string& causal_lm) const;
};

// Opens and validates the headers; throws troupe::error(invalid_checkpoint / io_error) naming the
// file (no weights, a bad index, a missing shard).
weight_files open_weights(const std::filesystem::path& root, residency where = residency::mapped);

// A whole file (config.json, the index); troupe::error(io_error) naming it when it cannot be read.
std::string read_text(const std::filesystem::path& p);
// model.safetensors.index.json or a *.safetensors file: what a writer replaces.
bool is_weight_file(const std::string& file_name);

}  // namespace troupe
