#pragma once
// What the CUDA runner does not do (runtime/engine/cuda/cuda_model_runner.hpp), as one list:
// `troupe serve`'s config (serve::validate, by config key) and the one-shot commands' flags
// (tools/troupe/model_flags.cpp, by flag) refuse the same settings for the same reasons.

#include <cstdint>
#include <optional>

#include "runtime/core/dtype.hpp"
#include "runtime/quant/quant_config.hpp"
#include "kernels/kernels.hpp"

namespace troupe::serve {

// The settings beside `device = cuda`, parsed.
struct device_settings {
  int32_t tensor_parallel_size = 1;
  dtype kv_cache = dtype::f32;
  kernels::compute_dtype compute = kernels::compute_dtype::f32;
  bool lora = false;
  quant::method quantization = quant::method::none;
  int32_t pipeline_parallel_size = 1;
};

enum class cpu_only { tensor_parallel_size, kv_cache_dtype, compute_dtype, lora, quantization, pipeline_parallel_size };

struct cpu_only_setting {
  cpu_only setting;
  const char* why;  // e.g. "the device pool is float32"
};

// The first setting the CUDA runner cannot take, or nothing.
std::optional<cpu_only_setting> first_cpu_only(const device_settings& s);

}  // namespace troupe::serve
