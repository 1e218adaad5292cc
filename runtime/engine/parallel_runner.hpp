// The CPU engine over every way this project splits a model: pipeline stages of consecutive layers
// (vLLM's --pipeline-parallel-size), each a tensor-parallel group of shards (tensor_parallel_runner,
// expert parallel when asked). The caller sees model_runner's contract: one batch in, the whole
// vocabulary's logits out, one block table per sequence addressing the same block in every pool.
//
// With one stage this is the tensor-parallel group on the caller's thread, bit for bit. With more,
// each stage holds only its layers' K/V and the stage boundary carries the residual stream; a step
// runs on the stages by the schedule (shard.hpp's pipeline_schedule). As a wavefront, each stage
// runs on a thread of its own with its share of the threads (and its ranks' threads below it),
// and the batch is cut into parts (micro_batch.hpp): stage s works on part j while stage s + 1
// works on part j - 1. In turn, the whole batch passes the stages one after another on the
// caller's thread, each with all the threads; so does a step the wavefront would give one part
// (a lone decode token has nothing to overlap). Stages compute every layer exactly as one runner
// does, so logits equal the group's without stages bit for bit, whatever the schedule.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/engine/micro_batch.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/step.hpp"
#include "runtime/engine/tensor_parallel_runner.hpp"
#include "runtime/engine/tp_group.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/shard.hpp"

namespace troupe {

class parallel_runner {
 public:
  // ckpt must outlive the runner. parallel.pipeline_size stages, their layers from
  // pipeline_layer_bounds (parallel.pipeline_layers, or vLLM's even split); each stage a group of
  // parallel.size ranks (check_shardable). parallel.threads are the step's threads in all, split
  // among the stages (each at least its ranks' count; 0: OpenMP's count). Errors: troupe::error
  // naming the field (invalid_argument, unsupported), before any thread or pool exists.
  parallel_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size = 16, dtype kv_type = dtype::f32,
                  model_runner_options opts = {}, parallel_config parallel = {});
  ~parallel_runner();

  // model_runner::step's contract. A bad batch is refused before any stage writes K/V.
  void step(std::span<const step_sequence> batch, step_result& out);
  // LoRA adapters: every stage (and each of its ranks its share) holds the same slots.
  int32_t add_adapter(std::shared_ptr<const lora_adapter> adapter);
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);
  int64_t num_adapters() const noexcept { return stages_.front()->num_adapters(); }

  int32_t pipeline_size() const noexcept { return static_cast<int32_t>(stages_.size()); }
  int32_t tp_size() const noexcept { return stages_.front()->tp_size(); }
  bool expert_parallel() const noexcept { return stages_.front()->expert_parallel(); }
  // Each rank's OpenMP threads (with one stage and one rank: the caller's thread's during step()).
  int32_t threads_per_rank() const noexcept { return stages_.front()->threads_per_rank(); }
  // Stage s: its tensor-parallel group, and its layers [layer_bounds()[s], layer_bounds()[s + 1]).
  tensor_parallel_runner& stage(int32_t s) { return *stages_[static_cast<size_t>(s)]; }
  const tensor_parallel_runner& stage(int32_t s) const { return *stages_[static_cast<size_t>(s)]; }
  const std::vector<int64_t>& layer_bounds() const noexcept { return bounds_; }
  // The schedule chosen (pipeline_schedule::automatic resolved): wavefront or in_turn.
  pipeline_schedule schedule() const noexcept { return wavefront_ ? pipeline_schedule::wavefront : pipeline_schedule::in_turn; }
  const model_config& config() const noexcept { return ckpt_.config; }
  int32_t num_blocks() const noexcept { return stages_.front()->num_blocks(); }
  int32_t block_size() const noexcept { return stages_.front()->block_size(); }
  dtype kv_type() const noexcept { return stages_.front()->kv_type(); }
  // Bytes of every stage's pools together.
  size_t kv_bytes() const noexcept;

 private:
  void run_stage(int32_t s);
  void run_in_turn(std::span<const step_sequence> batch, step_result& out);
  int32_t micro_batch_count(std::span<const step_sequence> batch) const;

  const checkpoint& ckpt_;
  std::vector<int64_t> bounds_;
  std::vector<std::unique_ptr<tensor_parallel_runner>> stages_;
  std::unique_ptr<tp_group> threads_;  // the wavefront's threads, one per stage; null otherwise
  bool wavefront_ = false;
  int32_t share_ = 0;        // a stage's threads in the wavefront (its tensor_parallel_runner's count)
  int32_t all_threads_ = 0;  // a stage's threads in turn: parallel.threads, or OpenMP's count
  aligned_vector<float> turn_[2];  // the residual rows between stages in turn
  // One step's wavefront: the parts, each part's residual rows (stage s turns them into stage
  // s + 1's input in place), the last stage's results, and how many stages each part has passed.
  std::vector<micro_batch> parts_;
  std::vector<aligned_vector<float>> residual_;
  std::vector<step_result> results_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> passed_;
  bool failed_ = false;  // a stage threw: the others stop at their next wait
};

}  // namespace troupe
