#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/device.hpp"

namespace troupe::kernels::cuda {

int device_count() noexcept {
  int n = 0;  // left untouched by cudaGetDeviceCount on error (no driver)
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string describe_device(int i) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, i);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  char buf[640];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.0f GiB)", p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace troupe::kernels::cuda
