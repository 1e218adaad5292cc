// kernels/cuda/graph.hpp: a non-blocking stream, stream capture into a graph, replay.
#include "kernels/cuda/graph.hpp"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw_error(e == cudaErrorMemoryAllocation ? errc::resource_exhausted : errc::internal,
              what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace

stream::stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (is there a CUDA device?)");
  s_ = s;
}

stream::~stream() {
  if (s_ != nullptr) cudaStreamDestroy(s_);
}

void stream::synchronize() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

graph::~graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

graph::graph(graph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}

graph& graph::operator=(graph&& o) noexcept {
  std::swap(exec_, o.exec_);
  std::swap(nodes_, o.nodes_);
  return *this;
}

graph graph::capture(const stream& s, const std::function<void()>& record) {
  check(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t g = nullptr;
  try {
    record();
  } catch (...) {
    cudaStreamEndCapture(s.get(), &g);  // leaves the stream out of capture mode
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();  // the capture's invalidation error, if any, is not this caller's next error
    throw;
  }
  check(cudaStreamEndCapture(s.get(), &g), "cudaStreamEndCapture");
  graph out;
  size_t nodes = 0;
  cudaGraphGetNodes(g, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  check(e, "cudaGraphInstantiate");
  out.exec_ = exec;
  out.nodes_ = nodes;
  return out;
}

void graph::launch(const stream& s) const {
  if (exec_ == nullptr) throw_error(errc::internal, "graph::launch: an empty graph");
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), s.get()), "cudaGraphLaunch");
}

void copy_to_device_async(void* dst, const void* src, size_t bytes, const stream& s) {
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()), "cudaMemcpyAsync to device");
}

void copy_to_host_async(void* dst, const void* src, size_t bytes, const stream& s) {
  if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.get()), "cudaMemcpyAsync to host");
}

}  // namespace troupe::kernels::cuda
