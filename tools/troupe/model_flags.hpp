// The flags `troupe generate`, `troupe logits` and `troupe embed` share to load and run a model:
// --quantization, --kv-cache-dtype, --rope-scaling, --no-mmap, --compute-dtype, --lora,
// --tensor-parallel-size, --enable-expert-parallel, --threads, --device.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "kernels/kernels.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/shard.hpp"

namespace troupe::cli {

struct model_flags {
  std::string quantization = "none", kv_dtype = "auto", rope_scaling, compute = "f32", lora, device = "cpu";
  std::string generation_config = "auto", override_generation_config;
  bool no_mmap = false, expert_parallel = false;
  int32_t tensor_parallel_size = 1, threads = 0, pipeline_parallel_size = 1;
  std::string pipeline_layers;  // --pipeline-layers: layers per stage, e.g. "10,8,10"
  std::string pipeline_schedule = "auto";  // --pipeline-schedule

  void add_to(CLI::App& app);

  // The model in `dir` loaded as the flags say, with what running it needs. --quantization,
  // --kv-cache-dtype, --compute-dtype and --device (with what it cannot run beside) are checked
  // before the weights are read, --rope-scaling
  // and --lora against the model's config after: troupe::error naming the flag or file.
  struct loaded {
    std::unique_ptr<checkpoint> ck;
    dtype kv_type = dtype::f32;
    kernels::compute_dtype compute = kernels::compute_dtype::f32;
    std::shared_ptr<const lora_adapter> adapter;  // null without --lora
    parallel_config parallel;                     // checked against the model (check_shardable)
    step_engine_factory engines;                  // --device cuda: the CUDA runner; null: the CPU engine
    // The run options these flags set (KV cache dtype, compute dtype, adapter); the rest default.
    generate_options run_options() const;
  };
  loaded load(const std::string& dir) const;
};

}  // namespace troupe::cli
