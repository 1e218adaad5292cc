// A tensor-parallel group inside one process: one thread per rank, each running its shard of the
// same step, and the collective the shards need (an all-reduce of partial sums) through shared
// memory. What NCCL is to a group of GPUs, this is to a group of CPU shards (docs/engine.md,
// "Tensor parallelism").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe {

class tp_group {
 public:
  // size ranks, each with threads_per_rank OpenMP threads of its own (0: the process's OpenMP
  // thread count divided among the ranks, at least 1 each). Throws invalid_argument for size < 1.
  explicit tp_group(int32_t size, int32_t threads_per_rank = 0);
  ~tp_group();
  tp_group(const tp_group&) = delete;
  tp_group& operator=(const tp_group&) = delete;

  int32_t size() const noexcept { return size_; }
  int32_t threads_per_rank() const noexcept { return threads_per_rank_; }

  // Runs fn(rank) on every rank's thread at once and returns when all have finished. When any
  // throws, the others are released from the collective they wait in (they throw too), and the
  // exception of the lowest rank that threw first is rethrown here; the group stays usable.
  // One run at a time (callers serialise: a shard executor runs one step at a time).
  void run(const std::function<void(int32_t rank)>& fn);

  // Inside run(), called by every rank with the same count: afterwards each rank's buf holds the
  // element-wise sum of all ranks' bufs, added in rank order (0 + 1 + ... + size-1), so every rank
  // gets the same bits and the result depends on nothing but the ranks' inputs.
  void all_reduce_sum(int32_t rank, float* buf, int64_t count);
  // Inside run(): returns once every rank has called it.
  void barrier();

 private:
  void worker(int32_t rank);

  int32_t size_;
  int32_t threads_per_rank_;
  std::vector<std::thread> threads_;
  // Dispatch: a job generation counter under mu_; done_ counts ranks finished with it.
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int32_t)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int32_t done_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  // The collective: every rank's buffer, and a sense-reversing barrier that an error aborts.
  std::vector<float*> bufs_;
  struct sync;
  sync* sync_;
};

}  // namespace troupe
