// A forward step with the KV pool it writes, whatever runs it: what the generator (troupe generate,
// logits, embed) can drive instead of the CPU engine it makes by default, and the base of the
// serving executor's backends (runtime/serve/step_backend.hpp). The CUDA runner is one
// (serve::make_cuda_backend); the step's contract is runtime/engine/step.hpp's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "runtime/engine/step.hpp"

namespace troupe {

class step_engine {
 public:
  virtual ~step_engine() = default;
  // model_runner::step's contract: the whole vocabulary's logits rows (or hidden rows).
  virtual void step(std::span<const step_sequence> batch, step_result& out) = 0;
  virtual int32_t num_blocks() const noexcept = 0;
};

// Makes an engine over a pool of num_blocks blocks of block_size tokens.
using step_engine_factory = std::function<std::unique_ptr<step_engine>(int32_t num_blocks, int32_t block_size)>;

}  // namespace troupe
