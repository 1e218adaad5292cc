// Packed-integer checkpoints read into Troupe's INT8 layout: GPTQ (AutoGPTQ / GPTQModel / optimum,
// "quant_method": "gptq") and AWQ (AutoAWQ's GEMM layout, "quant_method": "awq").
//
// A GPTQ linear layer stores, for a weight of `rows` outputs and `cols` inputs:
//   qweight  I32 [cols / (32 / bits), rows]  code of input c, output r: bits (c % pack) of word [c / pack][r]
//   qzeros   I32 [groups, rows / (32 / bits)] zero point of group g, output r: bits (r % pack) of [g][r / pack]
//   scales   F16 [groups, rows]               (BF16 / F32 read too)
//   g_idx    I32 [cols], optional             group of input c; must be c / group_size here
// with groups = ceil(cols / group_size) and w[r][c] = scale[g][r] * (code - zero), zero being the
// stored value + 1 in the "gptq" (v1) format. code - zero fits INT8 for 4-bit weights and for
// symmetric 8-bit ones (zero 128), so each becomes one INT8 code with the group's scale: the same
// values, run by the INT8 kernels.
//
// An AWQ (GEMM) layer stores 4-bit codes and zero points packed along the outputs, eight a word in
// the order AutoAWQ's kernels want (output 8p + m in nibble [0, 4, 1, 5, 2, 6, 3, 7][m]):
//   qweight  I32 [cols, rows / 8]      qzeros I32 [groups, rows / 8]      scales F16 [groups, rows]
// with w[r][c] = scale * (code - zero) and no offset on the zero.
//
// Both layouts are input-major: the codes are transposed into owned memory. A 4-bit weight whose
// inputs are a multiple of 16 becomes a u4 weight (kernels.hpp: q and a zero per group, half a
// byte a weight, the INT8 codes' values and kernel bits); other weights become INT8 codes, one
// byte a weight.
#pragma once

#include <string>
#include <vector>

#include "runtime/quant/quant_config.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/model/weight_files.hpp"

namespace troupe::quant {

// The names of the packed tensors of the linear layer whose float weight would be `weight_name`
// ("<prefix>.weight"): qweight, qzeros, scales, g_idx (GPTQ only, optional).
std::vector<std::string> packed_tensor_names(const std::string& weight_name);

// True when `wf` holds "<prefix>.qweight" for `weight_name`.
bool has_packed_weight(const weight_files& wf, const std::string& weight_name);

// Reads the GPTQ tensors of `weight_name` ([rows, cols] as the config says) into INT8 codes and
// float32 scales with q.group_size columns a scale. Throws troupe::error naming the file and the
// tensor: invalid_checkpoint for a missing tensor, a wrong shape or dtype; unsupported for an
// act-order g_idx or a code - zero outside [-128, 127] (asymmetric 8-bit). four_bit: 4-bit weights
// become u4 where they can (else INT8 codes, as always with false).
quantized_weight read_gptq_weight(const weight_files& wf, const std::string& weight_name, int64_t rows, int64_t cols,
                                  const quant_config& q, bool four_bit = true);

// The same for AWQ's GEMM layout (q.bits is 4).
quantized_weight read_awq_weight(const weight_files& wf, const std::string& weight_name, int64_t rows, int64_t cols,
                                 const quant_config& q, bool four_bit = true);

// The INT8 codes (q - zero) of a u4 weight, [rows, cols]: what a Troupe INT8 checkpoint stores.
std::vector<int8_t> int8_codes_of_u4(const kernels::weight_ref& w);

}  // namespace troupe::quant
