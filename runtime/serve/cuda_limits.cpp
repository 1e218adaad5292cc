#include "runtime/serve/cuda_limits.hpp"

namespace troupe::serve {

std::optional<cpu_only_setting> first_cpu_only(const device_settings& s) {
  if (s.tensor_parallel_size != 1) return cpu_only_setting{cpu_only::tensor_parallel_size, "CPU shards"};
  if (s.pipeline_parallel_size != 1) return cpu_only_setting{cpu_only::pipeline_parallel_size, "CPU pipeline stages"};
  if (s.kv_cache != dtype::f32) return cpu_only_setting{cpu_only::kv_cache_dtype, "the device pool is float32"};
  if (s.compute != kernels::compute_dtype::f32) return cpu_only_setting{cpu_only::compute_dtype, "the device computes float32"};
  if (s.lora) return cpu_only_setting{cpu_only::lora, "LoRA adapters"};
  if (s.quantization == quant::method::int8) return cpu_only_setting{cpu_only::quantization, "the device takes fp8"};
  return std::nullopt;
}

}  // namespace troupe::serve
