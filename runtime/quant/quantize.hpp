// Quantizing one float weight (F32 / BF16 / F16, [rows, cols]) into owned buffers: INT8 with one
// symmetric scale per output row and group of input columns, or FP8 e4m3 with one scale per block
// (Qwen's scheme). Deterministic: the same weight gives the same bytes on every machine, so a
// model quantized on load equals the one `troupe quantize` writes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels/kernels.hpp"

namespace troupe::quant {

struct quantized_weight {
  kernels::weight_ref ref;              // type i8, u4 or f8_e4m3; points into the buffers below
  std::shared_ptr<const void> codes;    // ref.bytes() bytes, 64-byte aligned
  std::shared_ptr<const void> scales;   // [scale_rows, scale_cols] float32
  std::shared_ptr<const void> zeros;    // u4: [scale_rows, scale_cols] uint8; else empty
};

// The codes and scales go to 2 MB pages (quantized_buffer).
// INT8: group_size input columns per scale (a power of two in [32, 4096]; 0 or >= cols: one scale
// per row). scale = max|w| / 127 over the group, code = round_half_even(w / scale) in [-127, 127];
// an all-zero group has scale 0 and codes 0.
quantized_weight quantize_int8(const kernels::weight_ref& w, int32_t group_size);

// FP8: blocks of block_rows x block_cols; scale = max|w| / 448 over the block (the dequantising
// multiplier Qwen stores as weight_scale_inv), code = e4m3(w / scale) rounded to nearest even.
quantized_weight quantize_fp8(const kernels::weight_ref& w, int32_t block_rows, int32_t block_cols);

// INT8's input columns per scale for a weight of `cols` columns: group_size, or the whole row when
// group_size is 0 (one scale per output channel) or at least the row.
inline int64_t int8_group_cols(int64_t group_size, int64_t cols) {
  return group_size == 0 || group_size >= cols ? std::max<int64_t>(cols, 1) : group_size;
}

// A 64-byte aligned buffer for quantized codes or scales, on 2 MB pages (advised MADV_HUGEPAGE):
// whether the checkpoint is mapped or copied, the kernels stream these every token.
std::shared_ptr<void> quantized_buffer(size_t bytes);

// Element (r, c) of a float weight widened to float32 (a quantized one: kernels::dequantized_at).
float float_weight_at(const kernels::weight_ref& w, int64_t r, int64_t c);

}  // namespace troupe::quant
