// An owning device allocation for tests and benchmarks (plain C++: no CUDA headers). Errors throw
// troupe::error naming the CUDA failure; the destructor never throws.
#pragma once

#include <cstddef>
#include <utility>

namespace troupe::kernels::cuda {

class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(size_t bytes);  // cudaMalloc; throws resource_exhausted / unsupported
  ~device_buffer();
  device_buffer(device_buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  void* data() const noexcept { return ptr_; }
  template <class T>
  T* as() const noexcept { return static_cast<T*>(ptr_); }
  size_t size_bytes() const noexcept { return bytes_; }

  // Synchronous copies of `bytes` (at most size_bytes()) from / to host memory.
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill_zero();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Waits for all work on the current device; throws troupe::error (internal) on a pending error.
void synchronize();

}  // namespace troupe::kernels::cuda
