// Loading a model with quantized weights: float checkpoints as load_checkpoint reads them,
// optionally quantized on load (INT8 / FP8), and pre-quantized checkpoints in the Hugging Face
// layout (Qwen's FP8, Troupe's INT8) used in place from the memory maps, never re-quantized.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/model/checkpoint.hpp"
#include "runtime/quant/quant_config.hpp"

namespace troupe::quant {

struct load_options {
  // Quantize a float checkpoint's linear weights on load; none keeps what is stored. Asking for a
  // method on a checkpoint already quantized with it is a no-op; with another method, an error.
  method quantization = method::none;
  int32_t group_size = 128;                // INT8: input columns per scale (0: per output channel)
  int32_t block_rows = 128, block_cols = 128;  // FP8: weight_scale_inv blocks (Qwen's)
  // Quantize the output projection too (a copy of embed_tokens when tied: the model then holds an
  // untied INT8 lm_head). Default: yes for INT8 (it is a quarter of a 0.6B model's bytes), no for
  // FP8 (Qwen's FP8 checkpoints keep lm_head in BF16 and other engines expect that).
  std::optional<bool> quantize_lm_head;
  // After quantizing, drop the float source pages from this process's resident set (madvise):
  // the model then costs its quantized bytes, not both.
  bool release_source_pages = true;
  // Where the checkpoint's bytes live: memory-mapped files (default), or a copy on 2 MB pages
  // (runtime/core/mapped_file.hpp, --no-mmap). Weights quantized on load go on 2 MB pages either way.
  residency weights = residency::mapped;
  // GPTQ / AWQ 4-bit weights stay 4-bit in memory (u4: half a byte a weight, the same outputs);
  // false widens them to INT8 codes (one byte a weight), as Troupe did before it had u4 kernels.
  bool four_bit_codes = true;
  // Replaces config.json's RoPE scaling (override_rope_scaling: a JSON object, or null); "" keeps it.
  std::string rope_scaling;
  // The default sampling's source and overrides (resolve_generation_config: vLLM's
  // --generation-config auto|vllm|DIR and --override-generation-config JSON).
  std::string generation_config = "auto";
  std::string override_generation_config;
};

// Loads `dir`. Throws troupe::error as load_checkpoint does, plus: unsupported / invalid_checkpoint
// naming the field of a bad quantization_config, a quantized tensor without its scales (or with
// the wrong shape or dtype), a quantized embedding table; invalid_argument for a method that
// conflicts with the checkpoint's own.
std::unique_ptr<checkpoint> load_model(const std::string& dir, const load_options& options = {});

// Quantizes every linear weight of a float model in place (owned buffers in ckpt.owned): q/k/v/o
// and the MLPs (experts included); lm_head when asked; never embed_tokens, norms or MoE routers.
// Weights already quantized are left as they are. Updates weights.bytes / active_bytes.
void quantize_weights(checkpoint& ckpt, const load_options& options);

// The quantization the loaded weights carry: method and parameters (none for a float model);
// bits 4 when 4-bit weights stay 4-bit in memory (u4), with method int8 (INT8's values and bits).
quant_config weight_quantization(const checkpoint& ckpt);

// What besides the model decides its outputs' bits on this machine: "<int8|fp8>-<grouped|dequant>"
// (kernels::quant_arithmetic()) for quantized weights, "" for float ones (the same bits on every
// back-end). Replicas share prefix-cache entries only when this matches too.
std::string kernel_arithmetic(const checkpoint& ckpt);

}  // namespace troupe::quant
