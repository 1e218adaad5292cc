// What a shard executor runs its steps on: the forward step of one device (the CPU engine, maybe a
// tensor-parallel group of CPU shards, or the CUDA runner) with the KV pool it owns, and the block
// copies prefix caching needs (fetched K/V in before a step, published K/V out after). The executor
// (batch_executor) samples on the host whatever the backend; only the step and its pool differ.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/step.hpp"
#include "runtime/engine/step_engine.hpp"
#include "runtime/kv/block_allocator.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/prefix/block_codec.hpp"

namespace troupe::serve {

// step() and num_blocks() are step_engine's (runtime/engine/step_engine.hpp).
class step_backend : public step_engine {
 public:
  // A block's K/V as prefix caching stores it (kv_layout()'s payload: the whole model's heads, per
  // layer K then V), appended to `out`; and the reverse, before the step that reads it. Both throw
  // troupe::error(invalid_argument) for a block outside the pool or a payload of the wrong size.
  virtual void save_block(block_id b, std::string& out) const = 0;
  virtual void load_block(block_id b, std::string_view payload) = 0;
  virtual prefix::kv_layout kv_layout() const = 0;
  // A LoRA adapter into `slot` (null: the slot emptied), between steps: adapters loaded and
  // unloaded while the server runs (adapter_registry). Throws troupe::error: unsupported where
  // the backend runs no adapters (the CUDA runner), invalid_argument for one of another model.
  virtual void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);
};

inline void step_backend::set_adapter(int32_t, std::shared_ptr<const lora_adapter>) {
  throw_error(errc::unsupported, "LoRA adapters run on the CPU engine only");
}

// The CPU engine (tensor_parallel_runner: one model_runner, or a group of `parallel.size` shards)
// over a pool of num_blocks blocks of kv_type, with the LoRA adapters in slot order.
std::unique_ptr<step_backend> make_cpu_backend(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks,
                                               int32_t block_size, dtype kv_type = dtype::f32,
                                               model_runner_options runner_options = {},
                                               const std::vector<std::shared_ptr<const lora_adapter>>& adapters = {},
                                               parallel_config parallel = {});

}  // namespace troupe::serve
