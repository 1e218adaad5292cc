#include "runtime/engine/tp_group.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "runtime/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TROUPE_CPU_RELAX() _mm_pause()
#else
#define TROUPE_CPU_RELAX() ((void)0)
#endif

namespace troupe {

namespace {
// Thrown out of a collective when another rank failed: the run ends with that rank's error.
struct tp_aborted final : std::exception {
  const char* what() const noexcept override { return "tensor-parallel group: another rank failed"; }
};
}  // namespace

// A sense-reversing barrier on atomics: the ranks are dedicated threads that meet several times a
// layer, a few microseconds apart, so they spin briefly before yielding the core.
struct tp_group::sync {
  alignas(64) std::atomic<int32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> phase{0};
  alignas(64) std::atomic<bool> aborted{false};
};

tp_group::tp_group(int32_t size, int32_t threads_per_rank) : size_(size), sync_(new sync) {
  if (size < 1) {
    delete sync_;
    throw_error(errc::invalid_argument, "tensor_parallel_size must be >= 1 (got " + std::to_string(size) + ")");
  }
  threads_per_rank_ = threads_per_rank > 0 ? threads_per_rank : std::max(1, omp_get_max_threads() / size);
  bufs_.assign(static_cast<size_t>(size), nullptr);
  errors_.assign(static_cast<size_t>(size), nullptr);
  threads_.reserve(static_cast<size_t>(size));
  for (int32_t r = 0; r < size; ++r) threads_.emplace_back([this, r] { worker(r); });
}

tp_group::~tp_group() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
  delete sync_;
}

void tp_group::worker(int32_t rank) {
  // Each rank's parallel regions get their own team of this size (OpenMP's thread count is a
  // per-thread setting), so the ranks together use the cores the process was given.
  omp_set_num_threads(threads_per_rank_);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int32_t)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(rank);
    } catch (...) {
      err = std::current_exception();
      sync_->aborted.store(true, std::memory_order_release);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_[static_cast<size_t>(rank)] = err;
      ++done_;
    }
    done_cv_.notify_one();
  }
}

void tp_group::run(const std::function<void(int32_t)>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    done_ = 0;
    std::fill(errors_.begin(), errors_.end(), nullptr);
    ++generation_;
  }
  start_cv_.notify_all();
  std::exception_ptr first;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_ == size_; });
    job_ = nullptr;
    // The rank that failed, not the ranks it released from a collective.
    for (const auto& e : errors_) {
      if (!e) continue;
      bool released = false;
      try {
        std::rethrow_exception(e);
      } catch (const tp_aborted&) {
        released = true;
      } catch (...) {
      }
      if (!released) {
        first = e;
        break;
      }
      if (!first) first = e;
    }
  }
  // Every rank is out of the collectives: a failed run leaves the barrier half-arrived.
  sync_->arrived.store(0, std::memory_order_relaxed);
  sync_->aborted.store(false, std::memory_order_relaxed);
  if (first) std::rethrow_exception(first);
}

void tp_group::barrier() {
  if (size_ == 1) return;
  auto& s = *sync_;
  const uint32_t phase = s.phase.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    s.arrived.store(0, std::memory_order_relaxed);
    s.phase.store(phase + 1, std::memory_order_release);
    return;
  }
  for (uint32_t spins = 0; s.phase.load(std::memory_order_acquire) == phase; ++spins) {
    if (s.aborted.load(std::memory_order_acquire)) throw tp_aborted{};
    if (spins < 2048)
      TROUPE_CPU_RELAX();
    else
      std::this_thread::yield();
  }
}

void tp_group::all_reduce_sum(int32_t rank, float* buf, int64_t count) {
  if (size_ == 1) return;
  bufs_[static_cast<size_t>(rank)] = buf;
  barrier();  // every rank's partial sums are complete and published
  // Rank r adds up its slice of the elements (whole cache lines, so no two ranks write one) in rank
  // order and writes the sum to every rank's buffer.
  const int64_t per = ((count + size_ - 1) / size_ + 15) / 16 * 16;
  const int64_t lo = std::min(count, rank * per), hi = std::min(count, lo + per);
  if (hi > lo) {
    float* sum = bufs_[0] + lo;
    for (int32_t q = 1; q < size_; ++q) {
      const float* part = bufs_[static_cast<size_t>(q)] + lo;
      for (int64_t i = 0; i < hi - lo; ++i) sum[i] += part[i];
    }
    for (int32_t q = 1; q < size_; ++q) std::copy(sum, sum + (hi - lo), bufs_[static_cast<size_t>(q)] + lo);
  }
  barrier();  // every slice is summed everywhere
}

}  // namespace troupe
