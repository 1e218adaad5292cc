// The CUDA forward step (cuda_model_runner) behind a shard executor: `troupe serve --device cuda`.
// Its KV pool lives on the device (float32); prefix caching copies blocks through the host in the
// CPU pool's payload layout. What the runner cannot do (MoE, INT8 weights, LoRA, a quantized KV
// pool, tensor parallelism) the server refuses at start-up (serve::validate, make_cuda_backend).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/engine/cuda/cuda_model_runner.hpp"
#include "runtime/serve/step_backend.hpp"

namespace troupe::serve {

// Uploads the weights to device 0 (the checkpoint is not read afterwards) and makes a pool of
// num_blocks blocks there. Throws what cuda_model_runner's constructor throws (unsupported naming
// the model's feature, or "no CUDA device"; resource_exhausted when the device memory does not
// suffice).
std::unique_ptr<step_backend> make_cuda_backend(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size,
                                                cuda_runner_options opts = {});

}  // namespace troupe::serve
