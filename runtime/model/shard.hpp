// Megatron-LM's split of a Qwen3 checkpoint over a tensor-parallel group: what one rank runs.
//
// Rank r of `size` keeps heads [r*H/size, (r+1)*H/size) of the query heads and of the KV heads
// (rows of q_proj, k_proj, v_proj: "column-parallel"), the same slice of o_proj's input columns
// ("row-parallel": its output is a partial sum), the rows r*I/size.. of gate_proj and up_proj, the
// matching columns of down_proj (every expert alike, by moe_intermediate_size), and a contiguous
// range of lm_head's rows (the vocabulary). Embeddings, norms and the MoE router stay whole.
// Attention and the MLP then need one all-reduce each (after o_proj and down_proj), and each
// rank's logits are its vocabulary range.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model/checkpoint.hpp"

namespace troupe {

// Throws troupe::error(unsupported) naming the field when `size` ranks cannot split this model:
// num_attention_heads, num_key_value_heads, intermediate_size or moe_intermediate_size not a
// multiple of size, or a quantized weight whose scale groups a split would cut.
void check_shardable(const checkpoint& full, int32_t size);

// Rank `rank`'s part. Its config has the rank's head counts and MLP widths (num_attention_heads,
// num_key_value_heads, intermediate_size, moe_intermediate_size divided by size); vocab_size stays
// the model's (token ids are checked against it) and weights.lm_head.rows is the rank's range of
// it (vocab_range). Row slices point into `full`'s memory, which must outlive the shard; column
// slices (o_proj, down_proj) are copies the shard owns. size 1 gives a view of the whole model.
std::unique_ptr<checkpoint> shard_checkpoint(const checkpoint& full, int32_t rank, int32_t size);

// Rows [r0, r0 + n) of w: a view into w's memory (its scales and zeros too). r0 must start a scale
// block (check_shardable checks the model's slices).
kernels::weight_ref slice_rows(const kernels::weight_ref& w, int64_t r0, int64_t n);
// Columns [c0, c0 + n) of every row of w, copied (codes, and the scale and zero columns of their
// groups) into memory appended to `owned`; c0 and n on scale-group boundaries (whole 16-column
// words for u4), or any range when one scale covers a row.
kernels::weight_ref copy_columns(const kernels::weight_ref& w, int64_t c0, int64_t n,
                                 std::vector<std::shared_ptr<const void>>& owned);

// The first vocabulary row of rank `rank` (rank == size: vocab_size), on lm_head's scale-group
// boundaries.
int64_t vocab_range_begin(const checkpoint& full, int32_t rank, int32_t size);

}  // namespace troupe
