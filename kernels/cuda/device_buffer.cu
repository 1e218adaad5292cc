#include "kernels/cuda/device_buffer.hpp"

#include <cuda_runtime.h>

#include <string>

#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
namespace {
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const errc code = e == cudaErrorMemoryAllocation               ? errc::resource_exhausted
                    : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? errc::unsupported
                                                                                 : errc::internal;
  throw_error(code, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
}  // namespace

device_buffer::device_buffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  check(cudaMalloc(&ptr_, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
}

device_buffer::~device_buffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

void device_buffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) throw_error(errc::invalid_argument, "device_buffer::upload: more bytes than the buffer holds");
  if (bytes > 0) check(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void device_buffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) throw_error(errc::invalid_argument, "device_buffer::download: more bytes than the buffer holds");
  if (bytes > 0) check(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void device_buffer::fill_zero() {
  if (bytes_ > 0) check(cudaMemset(ptr_, 0, bytes_), "cudaMemset");
}

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace troupe::kernels::cuda
