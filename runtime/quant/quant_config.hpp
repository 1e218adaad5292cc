// The quantization_config of a checkpoint's config.json, for the formats Troupe reads
// (docs/quantization.md): Qwen's FP8 ("quant_method": "fp8", e4m3 weights, block-wise
// weight_scale_inv) and Troupe's INT8 ("quant_method": "troupe_int8", per-group weight_scale), which
// it also writes, GPTQ's 4- and 8-bit integers ("quant_method": "gptq", as AutoGPTQ, GPTQModel and
// optimum write them) and AWQ's 4-bit ones ("quant_method": "awq", AutoAWQ's GEMM layout), which it
// converts to its INT8 layout on load (packed_int.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::quant {

enum class method { none, int8, fp8 };

// Where INT8 codes come from: Troupe's layout (used in place from the mapping), or GPTQ's or AWQ's
// packed int32 tensors (qweight, qzeros, scales), unpacked to codes q - zero on load.
enum class int8_source { troupe, gptq, awq };

// "none", "int8", "fp8" (the --quantization / --method spellings).
const char* method_name(method m) noexcept;
// Throws troupe::error(invalid_argument) naming `what` (the option) and the accepted values.
method parse_method(std::string_view text, std::string_view what);

struct quant_config {
  method kind = method::none;
  // INT8: input columns per scale; 0 = one scale per output channel. A power of two in [32, 4096].
  int32_t group_size = 128;
  // FP8: [rows, cols] of each weight_scale_inv block (Qwen: [128, 128]).
  int32_t block_rows = 128, block_cols = 128;
  // GPTQ / AWQ: bits per packed code (GPTQ 4 or 8, AWQ 4); gptq_v1: the "gptq" checkpoint format, whose qzeros hold
  // zero - 1 (AutoGPTQ's convention, kept on disk for compatibility), against "gptq_v2"'s zero.
  int8_source source = int8_source::troupe;
  int32_t bits = 8;
  bool gptq_v1 = true;
};

// Parses config.json's "quantization_config" object (its JSON text). Throws troupe::error naming
// `path` and the field: unsupported for a method or scheme Troupe does not run (gptq, awq, e5m2,
// static activation scales, ...), invalid_checkpoint for malformed values.
quant_config parse_quant_config(const std::string& json_text, const std::string& path);

// The quantization_config object as Troupe writes it (JSON text): Qwen's exact FP8 fields, or the
// INT8 fields above.
std::string to_json(const quant_config& c);

// Name of a quantized weight's scale tensor: "<weight>_scale" (INT8), "<weight>_scale_inv" (FP8).
std::string scale_tensor_name(const std::string& weight_name, method m);

}  // namespace troupe::quant
