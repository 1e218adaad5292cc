// `troupe quantize`'s writer: a quantized model as a Hugging Face checkpoint directory that loads
// without quantizing again (docs/quantization.md): codes + scales per linear weight, every other
// tensor copied byte for byte from the source, config.json with its quantization_config.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/checkpoint.hpp"

namespace troupe::quant {

struct write_summary {
  uint64_t weight_bytes = 0;  // size of the written model.safetensors
  int64_t quantized_tensors = 0;
};

// `ckpt` is the float checkpoint of `src_dir` after quantize_weights(). Writes out_dir/
// {config.json, model.safetensors} and copies every other file of src_dir (generation_config.json,
// tokenizer files, ...). Atomic: built in a temporary sibling directory renamed at the end. out_dir
// must not exist, be empty, or (with force) hold an earlier checkpoint's config.json. Throws
// troupe::error: invalid_argument (nothing quantized, out_dir in the way), io_error.
write_summary write_quantized_checkpoint(const checkpoint& ckpt, const std::string& src_dir,
                                         const std::string& out_dir, bool force = false);

}  // namespace troupe::quant
