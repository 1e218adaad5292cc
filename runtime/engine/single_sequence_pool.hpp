// A private KV pool just large enough for one sequence, with the identity block table: what the
// generator (troupe generate, logits, embed) runs a request on, and the draft_sequence of `troupe
// generate --speculative-model`. On the CPU engine, or on an engine from `engines` when one is
// given (the CUDA runner).
#pragma once

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/engine/step_engine.hpp"
#include "runtime/engine/parallel_runner.hpp"

namespace troupe {

struct single_sequence_pool {
  static constexpr int32_t block_size = 16;

  single_sequence_pool(const checkpoint& ckpt, int64_t max_len, dtype kv_type = dtype::f32,
                       model_runner_options runner_opts = {}, parallel_config parallel = {},
                       const step_engine_factory& engines = {})
      : table(static_cast<size_t>(std::max<int64_t>(1, (max_len + block_size - 1) / block_size))) {
    const auto blocks = static_cast<int32_t>(table.size());
    if (engines)
      engine = engines(blocks, block_size);
    else
      cpu.emplace(ckpt, blocks, block_size, kv_type, runner_opts, parallel);
    std::iota(table.begin(), table.end(), 0);
  }
  // The positions the pool holds.
  int64_t capacity() const noexcept { return static_cast<int64_t>(table.size()) * block_size; }
  void step(std::span<const step_sequence> batch, step_result& res) {
    if (cpu)
      cpu->step(batch, res);
    else
      engine->step(batch, res);
  }
  int32_t add_adapter(std::shared_ptr<const lora_adapter> adapter) {
    if (!cpu) throw_error(errc::unsupported, "LoRA adapters run on the CPU engine only");
    return cpu->add_adapter(std::move(adapter));
  }
  std::vector<int32_t> table;
  std::optional<parallel_runner> cpu;
  std::unique_ptr<step_engine> engine;
};

}  // namespace troupe
