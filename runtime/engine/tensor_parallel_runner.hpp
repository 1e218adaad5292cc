// The forward step of one model over a tensor-parallel group of CPU shards (Megatron-LM's split,
// runtime/model/shard.hpp): each rank runs its heads, its slice of the MLP and its range of the
// vocabulary on its own thread, with its own KV pool holding its KV heads, and the ranks sum their
// partial outputs twice a layer through shared memory (tp_group). The caller sees model_runner's
// contract: the same batch in, the whole vocabulary's logits out, one block table per sequence
// addressing the same block in every rank's pool.
//
// tp_size 1 is model_runner on one pool, on the caller's thread, bit for bit. With more ranks the
// row-parallel sums are added in another order than one rank's dot product (rank order, each
// rank's part in matmul's order), so logits differ from tp_size 1 by float32 rounding (within the
// golden tolerance) but stay independent of the batch and of prompt chunking for a given size.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/step.hpp"
#include "runtime/engine/tp_group.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/shard.hpp"

namespace troupe {

class tensor_parallel_runner {
 public:
  // ckpt must outlive the runner. The group's size must divide the model (check_shardable: heads,
  // KV heads, MLP widths, quantization groups), else troupe::error(unsupported) naming the field;
  // `parallel.expert_parallel` gives mixture-of-experts layers whole experts per rank instead;
  // `parallel.threads` the step's threads (omp_threads.hpp), whichever thread calls step().
  // opts.first_layer / end_layer make the group one pipeline stage (parallel_runner): its pools
  // and shards hold those layers only. parallel.pipeline_size is parallel_runner's, not read here.
  // rank_scratch (one per rank, or empty): each rank's runner shares that scratch
  // (model_runner_scratch), as pipeline stages that run in turn do; empty: each its own.
  tensor_parallel_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size = 16,
                         dtype kv_type = dtype::f32, model_runner_options opts = {}, parallel_config parallel = {},
                         const std::vector<std::shared_ptr<model_runner_scratch>>& rank_scratch = {});
  ~tensor_parallel_runner();

  // model_runner::step's contract, the logits rows spanning the whole vocabulary.
  void step(std::span<const step_sequence> batch, step_result& out);
  // A pipeline stage's part (model_runner::step's residual_in / residual_out): every rank reads
  // residual_in; after the stage's last all-reduce every rank holds the whole residual stream, and
  // rank 0's goes to *residual_out.
  void step(std::span<const step_sequence> batch, step_result& out, const float* residual_in,
            aligned_vector<float>* residual_out);
  // model_runner::validate (the checks step() makes before any K/V is written).
  void validate(std::span<const step_sequence> batch) const { runners_.front()->validate(batch); }
  // A LoRA adapter for sequences that name the returned slot; over a group each rank holds its
  // share (runtime/lora/lora_shard.hpp), so every slot means the same adapter on every rank.
  int32_t add_adapter(std::shared_ptr<const lora_adapter> adapter);
  // model_runner::set_adapter on every rank (each its share).
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);
  int64_t num_adapters() const noexcept;

  int32_t tp_size() const noexcept { return static_cast<int32_t>(runners_.size()); }
  // Each rank's scratch, in rank order.
  std::vector<std::shared_ptr<model_runner_scratch>> scratch() const;
  bool expert_parallel() const noexcept { return expert_parallel_; }
  // The OpenMP threads each rank's parallel regions get (with one rank: the caller's thread's
  // regions during step()); parallel_config::threads says how many in all.
  int32_t threads_per_rank() const noexcept;
  // With one rank: the team size of the next steps' parallel regions (0: the calling thread's
  // OpenMP count). A wavefront pipeline gives a stage all the threads for a step it runs in turn.
  void set_threads(int32_t threads) noexcept { threads_ = threads; }
  const model_config& config() const noexcept { return ckpt_.config; }
  int32_t num_blocks() const noexcept { return pools_.front()->num_blocks(); }
  int32_t block_size() const noexcept { return pools_.front()->block_size(); }
  dtype kv_type() const noexcept { return pools_.front()->kv_type(); }
  // Ranks that hold the same KV head: tp_size / H when the group is larger than the model's H KV
  // heads (shard.hpp replicates them), else 1.
  int32_t kv_replicas() const noexcept;
  // Rank r's pool: its KV heads [r * H / tp_size, (r + 1) * H / tp_size) of every block, or with
  // kv_replicas() > 1 the one head r / kv_replicas().
  kv_cache& kv(int32_t rank = 0) { return *pools_[static_cast<size_t>(rank)]; }
  const kv_cache& kv(int32_t rank = 0) const { return *pools_[static_cast<size_t>(rank)]; }
  // Every rank's pool, in rank order (prefix::gather_block / scatter_block take them).
  std::vector<const kv_cache*> pools() const;
  std::vector<kv_cache*> pools();
  // Bytes of every rank's pool together.
  size_t kv_bytes() const noexcept;

 private:
  const checkpoint& ckpt_;
  bool expert_parallel_ = false;
  int32_t threads_ = 0;  // parallel_config::threads
  std::unique_ptr<tp_group> group_;  // null for tp_size 1
  std::vector<std::unique_ptr<checkpoint>> shards_;
  std::vector<std::unique_ptr<kv_cache>> pools_;
  std::vector<std::unique_ptr<model_runner>> runners_;
  std::vector<step_result> partial_;  // each rank's logits over its vocabulary range
  std::vector<int64_t> vocab_begin_;  // rank r's first vocabulary row; [tp_size] = vocab size
  std::vector<aligned_vector<float>> residual_;  // ranks past 0: the residual rows they leave
};

}  // namespace troupe
