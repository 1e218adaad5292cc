// The timed decode loop of the engine and quantization benches (bench/engine, bench/quant).
#pragma once

#include <memory>

#include "runtime/core/dtype.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/model/shard.hpp"

namespace troupe::bench {

struct decode_speed {
  double wall = 0;  // tokens per second of wall time
  double cpu = 0;   // tokens per second of CPU time per thread (see process_cpu_seconds)
};

// CPU seconds of the whole process (all threads). Under OMP_WAIT_POLICY=passive idle threads sleep
// instead of spinning, so CPU time / threads estimates what an idle machine would take when other
// processes share the cores.
double process_cpu_seconds();

// Decodes `steps` tokens for `batch` sequences that each already hold `context` random tokens (one
// batched prefill step, untimed), each next token picked greedily as the engine does
// (greedy_next). `threads`: the OpenMP threads, for the CPU-time figure. adapter: every sequence
// runs it (LoRA's cost at its worst); null: none. A group of 2 or more: on a tensor-parallel group of
// that many CPU shards (tensor_parallel_runner; expert parallel when asked), the threads divided
// among them.
decode_speed measure_decode(const checkpoint& ck, int batch, int context, int steps, int threads,
                           model_runner_options opts = {}, dtype kv_dtype = dtype::f32,
                           std::shared_ptr<const lora_adapter> adapter = nullptr, parallel_config parallel = {});

// A LoRA adapter of `rank` on every projection of every layer, A and B random (|x| < 0.01), for
// timing: what a fine-tune of all linear layers (PEFT's target_modules="all-linear") costs.
std::shared_ptr<const lora_adapter> random_lora(const model_config& cfg, int64_t rank, uint64_t seed = 1);

}  // namespace troupe::bench
