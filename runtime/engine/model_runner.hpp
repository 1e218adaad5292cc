// Runs the Qwen3 / Qwen3-MoE forward pass (as transformers defines it) on a batch of sequences
// through the paged KV pool: the step every higher layer (generate, scheduler, executors) drives.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/core/aligned_vector.hpp"
#include "runtime/engine/step.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/rope.hpp"

namespace troupe {

class tp_group;

// A runner's activation scratch, sized to the largest batch it has seen. Runners that never step at
// the same time may share one (model_runner_options::scratch): the stages of a pipeline that run in
// turn do, so N stages cost one runner's scratch, not N.
struct model_runner_scratch {
  // 64-byte aligned: the matmul tiles load these rows a cache line at a time (aligned_vector.hpp).
  aligned_vector<float> x, h, q, k, v, attn, tmp, gate, up;
  aligned_vector<float> router, moe_out, expert_in, expert_gate, expert_up, expert_out;
  aligned_vector<float> final;
  aligned_vector<float> lora_x, lora_t, lora_u;
  aligned_vector<float> fp8_x;  // fp8_activations: the rounded rows
};

struct model_runner_options {
  // The matmul arithmetic for BF16 weights (kernels.hpp): f32 is exact (the default); bf16 rounds
  // activations to bf16 and multiplies as vdpbf16ps does (docs/engine.md, "bf16 compute").
  // Either way a sequence's logits stay independent of its batch and of prompt chunking.
  kernels::compute_dtype compute = kernels::compute_dtype::f32;
  // Tensor parallelism (tensor_parallel_runner): this runner is rank `tp_rank` of `tp`, its
  // checkpoint that rank's shard (shard_checkpoint): it all-reduces the partial sums of o_proj and
  // down_proj with the other ranks, and its logits rows are its vocabulary range. Null: alone.
  tp_group* tp = nullptr;
  int32_t tp_rank = 0;
  // Round each activation row to e4m3 per 128 columns before every product with FP8 weights
  // (kernels/fp8_activations.hpp): W8A8 as the CUDA FP8 GEMM computes it, so this runner is the CPU
  // reference of cuda_model_runner's FP8 path (tests, the bench's accuracy figures). Off (the
  // default): W8A16, float32 activations, the more accurate CPU scheme.
  bool fp8_activations = false;
  // Pipeline parallelism (parallel_runner): this runner is one stage, running layers
  // [first_layer, end_layer) of the checkpoint (end_layer -1: to the last); its KV pool holds those
  // layers only. A stage after the first takes the residual stream from the one before instead of
  // embedding the tokens, and one before the last hands its residual stream on instead of norming
  // and computing logits (step's residual_in / residual_out).
  int64_t first_layer = 0;
  int64_t end_layer = -1;
  // Scratch shared with runners that never step at the same time as this one; null: its own.
  std::shared_ptr<model_runner_scratch> scratch = nullptr;
};

// `--compute-dtype` / model.compute_dtype: "f32" or "bf16"; throws invalid_argument naming `option`.
kernels::compute_dtype parse_compute_dtype(std::string_view text, std::string_view option = "--compute-dtype");
const char* to_string(kernels::compute_dtype c) noexcept;

class model_runner {
 public:
  // Both must outlive the runner. The KV pool's shape must match the checkpoint's config.
  model_runner(const checkpoint& ckpt, kv_cache& kv, model_runner_options opts = {});
  // Its activations are references into its scratch: a copy would share them.
  model_runner(const model_runner&) = delete;
  model_runner& operator=(const model_runner&) = delete;

  // Runs one step. Throws troupe::error(invalid_input / out_of_range) for a malformed batch
  // (empty tokens, ids outside the vocab, a block table too short or naming a block outside
  // the pool, positions beyond max_position_embeddings) before touching any KV.
  void step(std::span<const step_sequence> batch, step_result& out);
  // One pipeline stage's part of the step (model_runner_options::first_layer / end_layer): a
  // stage after the first reads every token's residual stream from residual_in (rows of
  // hidden_size floats in batch order, what the stage before wrote) instead of embedding; a stage
  // before the last writes its layers' residual stream to *residual_out (the same rows, resized)
  // and leaves `out` alone. The same errors as step(), plus invalid_argument when residual_in or
  // residual_out is missing (or given) against the stage's place.
  void step(std::span<const step_sequence> batch, step_result& out, const float* residual_in,
            aligned_vector<float>* residual_out);
  // step()'s checks of the batch, without running it: what a pipeline's first stage runs for all
  // of them before any stage writes K/V.
  void validate(std::span<const step_sequence> batch) const;

  // Holds a LoRA adapter for sequences that name the returned slot (0, 1, ...) in
  // step_sequence::adapter. Throws invalid_argument if it was loaded for another layer count.
  int32_t add_adapter(std::shared_ptr<const lora_adapter> adapter);
  // Puts `adapter` in `slot` (the slots before it, if new, stay empty), or empties the slot
  // (null): a sequence naming an empty slot is refused (out_of_range). A server loading and
  // unloading adapters while it runs (serve::adapter_registry) says which slot.
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);
  int64_t num_adapters() const noexcept { return static_cast<int64_t>(adapters_.size()); }

  const model_config& config() const noexcept { return cfg_; }
  const model_runner_options& options() const noexcept { return opts_; }
  const std::shared_ptr<model_runner_scratch>& scratch() const noexcept { return scratch_; }
  int64_t first_layer() const noexcept { return first_layer_; }
  int64_t end_layer() const noexcept { return end_layer_; }

 private:
  // Decoder layer l on the n_ rows of x_ (keep: as attention_block's).
  void layer(int64_t l, std::span<const step_sequence> batch, const std::vector<int64_t>* keep);
  // keep: the rows to go on with after this layer's K and V (ascending; null: all), moved to the
  // front; n_ becomes their count.
  void attention_block(int64_t layer, std::span<const step_sequence> batch, const std::vector<int64_t>* keep);
  void dense_mlp(int64_t layer, const layer_weights& lw);
  void moe_mlp(const layer_weights& lw);
  // The partial sums of a row-parallel matmul (o_proj, down_proj) become the whole sums.
  void all_reduce(float* buf, int64_t count);
  void matmul(const float* x, int64_t n, const kernels::weight_ref& w, float* y);
  // Several projections of one x (q/k/v, gate/up) in one kernel call: the same bits as one call each.
  void matmul(const float* x, int64_t n, std::initializer_list<kernels::matmul_out> outs);
  // y[r] += scaling * B (A x[r]) for every row r of the first n_ whose sequence's adapter has a
  // pair on (layer, t); x rows have the pair's `in` floats, y rows its `out`.
  void apply_lora(int64_t layer, lora_target t, const float* x, float* y);

  const checkpoint& ckpt_;
  const model_config& cfg_;
  kv_cache& kv_;
  model_runner_options opts_;
  rope_frequencies rope_;
  int64_t first_layer_ = 0, end_layer_ = 0;  // the layers this runner runs (all, unless a pipeline stage)
  // Scratch, sized to the largest batch seen; rows = tokens in the step.
  int64_t n_ = 0;
  std::vector<int32_t> ids_, positions_;
  std::vector<int64_t> seq_rows_;     // each sequence's first query row in q_ / attn_
  std::vector<int64_t> seq_queries_;  // and how many queries it has there
  std::vector<std::shared_ptr<const lora_adapter>> adapters_;
  std::vector<int32_t> row_adapter_;    // each row's adapter slot (-1: none), moved with the rows
  std::vector<int32_t> step_adapters_;  // the distinct slots in this step's batch
  std::vector<int64_t> lora_rows_;
  // The activations (model_runner_scratch), by their old names.
  std::shared_ptr<model_runner_scratch> scratch_;
  aligned_vector<float>&x_ = scratch_->x, &h_ = scratch_->h, &q_ = scratch_->q, &k_ = scratch_->k, &v_ = scratch_->v;
  aligned_vector<float>&attn_ = scratch_->attn, &tmp_ = scratch_->tmp, &gate_ = scratch_->gate, &up_ = scratch_->up;
  aligned_vector<float>&router_ = scratch_->router, &moe_out_ = scratch_->moe_out, &expert_in_ = scratch_->expert_in;
  aligned_vector<float>&expert_gate_ = scratch_->expert_gate, &expert_up_ = scratch_->expert_up,
      &expert_out_ = scratch_->expert_out;
  aligned_vector<float>&final_ = scratch_->final;
  aligned_vector<float>&lora_x_ = scratch_->lora_x, &lora_t_ = scratch_->lora_t, &lora_u_ = scratch_->lora_u;
  aligned_vector<float>& fp8_x_ = scratch_->fp8_x;
};

}  // namespace troupe
