// A CUDA stream and captured CUDA graphs, for plain C++ (no CUDA headers here). The forward step
// (runtime/engine/cuda) records a decode step's ~500 launches once per batch size and replays them
// with one launch: at batch 1 a step is a few microseconds of work per kernel, so launching them
// one by one from the host costs more than running them.
#pragma once

#include <cstddef>
#include <functional>

#include "kernels/cuda/gemm.hpp"  // stream_t

namespace troupe::kernels::cuda {

// A stream of its own (cudaStreamNonBlocking: no implicit ordering with the legacy default
// stream, which cannot be captured). Throws troupe::error when there is no device.
class stream {
 public:
  stream();
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  stream_t get() const noexcept { return s_; }
  void synchronize() const;  // throws troupe::error (internal) naming a pending failure

 private:
  stream_t s_ = nullptr;
};

// An instantiated graph: what `record` launched on `s` between capture's begin and end. The
// capture is thread-local (other threads' CUDA calls do not spoil it). If record throws, the
// capture is ended and dropped, the stream is usable again and the exception propagates.
class graph {
 public:
  graph() = default;
  ~graph();
  graph(graph&& o) noexcept;
  graph& operator=(graph&& o) noexcept;
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  static graph capture(const stream& s, const std::function<void()>& record);
  void launch(const stream& s) const;  // asynchronous on s
  explicit operator bool() const noexcept { return exec_ != nullptr; }
  size_t nodes() const noexcept { return nodes_; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
  size_t nodes_ = 0;
};

// Asynchronous copies on s (pageable host memory: the host-to-device copy returns once the source
// is staged, the device-to-host one once the data has arrived, as CUDA documents).
void copy_to_device_async(void* dst, const void* src, size_t bytes, const stream& s);
void copy_to_host_async(void* dst, const void* src, size_t bytes, const stream& s);

}  // namespace troupe::kernels::cuda
