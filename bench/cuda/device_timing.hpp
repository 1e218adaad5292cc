// Timing helpers of the CUDA benchmarks: CUDA-event timing and the device-to-device copy
// bandwidth, the ceiling that weight streaming is reported against.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/cuda/device_buffer.hpp"
#include "runtime/core/error.hpp"

namespace troupe::bench::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_error(errc::internal, std::string(what) + ": " + cudaGetErrorString(e));
}

// Mean milliseconds per call of f(i) (i = repetition index) after warm-up, timed with events.
template <class F>
inline double time_ms(F&& f, int reps) {
  for (int i = 0; i < 3; ++i) f(i);
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  check(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) f(i);
  check(cudaEventRecord(b), "cudaEventRecord");
  check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  check(cudaGetLastError(), "timed calls");
  return ms / reps;
}

// Device-to-device copy of 1 GiB: read + write bytes per second, the practical DRAM ceiling.
inline double copy_bandwidth_gbs() {
  const size_t bytes = size_t{1} << 30;
  troupe::kernels::cuda::device_buffer src(bytes), dst(bytes);
  src.fill_zero();
  const double ms = time_ms([&](int) { check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice), "copy"); }, 10);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace troupe::bench::cuda
