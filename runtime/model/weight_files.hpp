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

  // The tensor `name` (nullptr when absent); file_path names where it is (or was looked for).
  const tensor_info* find(const std::string& name, std::string& file_path) const;
};

// Opens and validates the headers; throws troupe::error(invalid_checkpoint / io_error) naming the
// file (no weights, a bad index, a missing shard).
weight_files open_weights(const std::filesystem::path& root, residency where = residency::mapped);

// A whole file (config.json, the index); troupe::error(io_error) naming it when it cannot be read.
std::string read_text(const std::filesystem::path& p);
// model.safetensors.index.json or a *.safetensors file: what a writer replaces.
bool is_weight_file(const std::string& file_name);

}  // namespace troupe
