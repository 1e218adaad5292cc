// The forward step v0 on one CUDA device: dense Qwen3 exactly as model_runner computes it, with the
// same step() contract (runtime/engine/step.hpp), the weights and the paged KV pool in device memory.
// Plain C++ (no CUDA headers): the kernels are kernels/cuda/forward_ops.hpp and gemm.hpp.
//
// Accuracy first (docs/cuda.md, "Forward step v0"): activations are float32 everywhere; BF16/F16
// weights are widened to float32 on the device once (2x the bytes of BF16) and multiplied by
// cublasSgemm in pedantic fp32 (no TF32); FP8 block-scaled weights (Qwen's FP8, or quantized on load)
// go through matmul_fp8_block (W8A8: activations rounded to e4m3 per 128 columns).
// Decode steps of up to cuda_runner_options::max_graph_batch sequences replay a CUDA graph captured
// once per batch size (docs/cuda.md, "CUDA graphs").
// Not in v0: MoE (refused), tensor parallelism, bf16 activations, a quantized KV pool, LoRA, bitwise
// batch invariance (cuBLAS may pick a different algorithm per n).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "runtime/engine/step.hpp"
#include "runtime/model/checkpoint.hpp"

namespace troupe {

// The paged KV pool on the device: per layer K and V as [num_blocks, block_size, n_kv_heads, head_dim]
// float32 (the layout of kv_cache), one allocation, zeroed at construction.
class cuda_kv_pool {
 public:
  cuda_kv_pool(const model_config& config, int32_t num_blocks, int32_t block_size = 16);
  ~cuda_kv_pool();
  cuda_kv_pool(const cuda_kv_pool&) = delete;
  cuda_kv_pool& operator=(const cuda_kv_pool&) = delete;

  int32_t num_blocks() const noexcept { return num_blocks_; }
  int32_t block_size() const noexcept { return block_size_; }
  float* k(int64_t layer) const noexcept;  // device pointers
  float* v(int64_t layer) const noexcept;
  size_t bytes() const noexcept;
  // One block's K and V of every layer as float32, in prefix caching's payload order (per layer K
  // then V, each [block_size, n_kv_heads, head_dim]: prefix::layout_for(config, block_size)), so a
  // CPU pool and a device pool hold the same payload. Synchronous copies (call between steps);
  // throw troupe::error(invalid_argument) for a block outside the pool or a span of another size.
  size_t block_floats() const noexcept;
  void read_block(int32_t block, std::span<float> out) const;
  void write_block(int32_t block, std::span<const float> in);

 private:
  struct storage;
  int32_t num_blocks_;
  int32_t block_size_;
  int64_t num_layers_;
  int64_t layer_floats_;  // num_blocks * block_size * n_kv_heads * head_dim
  std::unique_ptr<storage> storage_;
};

struct cuda_runner_options {
  // A pure decode step (every sequence one token, logits of that token) of n <= max_graph_batch
  // sequences replays a CUDA graph of the whole step, captured the first time that n is seen
  // (vLLM captures per batch size too; it pads to a few sizes, here each n has its own). Same
  // kernels, same arguments: the logits are those of the launches one by one, bit for bit.
  // Off when TROUPE_CUDA_GRAPHS=0 or TROUPE_CUDA_SYNC_CHECK=1 is set in the environment.
  bool graphs = true;
  int32_t max_graph_batch = 32;
};

class cuda_model_runner {
 public:
  // Uploads every weight of `ckpt` to device 0 (the checkpoint may be dropped afterwards) and makes a
  // KV pool of num_blocks blocks. Throws troupe::error: unsupported for Qwen3MoeForCausalLM (checked
  // before touching the device), for INT8 weights, FP8 blocks other than 128 x 128 or FP8 shapes not
  // multiples of 16, or when there is no CUDA device; invalid_argument for num_blocks or block_size < 1;
  // resource_exhausted when the device memory does not suffice.
  cuda_model_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size = 16,
                    cuda_runner_options opts = {});
  ~cuda_model_runner();
  cuda_model_runner(const cuda_model_runner&) = delete;
  cuda_model_runner& operator=(const cuda_model_runner&) = delete;

  // One step, as model_runner::step: throws troupe::error(invalid_input / out_of_range) for a
  // malformed batch before any device work (validate below); logits copied back as float32, and
  // the final hidden state (after the last RMSNorm) of logits_mode::hidden sequences (embeddings).
  void step(std::span<const step_sequence> batch, step_result& out);

  // The batch checks of step(), without a device: the same errors and messages as model_runner.
  static void validate(const model_config& config, int32_t num_blocks, int32_t block_size,
                       std::span<const step_sequence> batch);
  // Throws unsupported (with the reason) unless this runner can run `config`; no device needed.
  static void check_supported(const model_config& config);

  const model_config& config() const noexcept;
  const cuda_kv_pool& kv() const noexcept;
  cuda_kv_pool& kv() noexcept;  // prefix caching copies blocks in and out between steps
  // Device bytes of the weights one step reads (lm_head once; embedding rows not counted when untied),
  // as stored on the device (float32 for widened BF16/F16, codes + scales for FP8).
  size_t weight_bytes_per_step() const noexcept;
  size_t device_weight_bytes() const noexcept;  // everything uploaded, embedding included
  // Decode graphs: whether they are on (options and environment), how many were captured (a batch
  // size's graph is captured again when a larger step reallocated the scratch it points into), and
  // how many steps replayed one.
  bool graphs_enabled() const noexcept;
  // How many stacked products (a layer's QKV, its gate/up) the upload made: 2 a layer for every
  // float checkpoint and every Qwen3 FP8 shape, fewer where FP8 parts are not whole scale blocks.
  int64_t stacked_products() const noexcept;
  int64_t graphs_captured() const noexcept;
  int64_t graph_replays() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe
