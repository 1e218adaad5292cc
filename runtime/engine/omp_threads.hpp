// The number of threads the engine's OpenMP parallel regions use (`--threads`, model.threads),
// set for a scope and put back after it. OpenMP keeps this count per thread (its nthreads-var),
// so a step run on a shard executor's thread must set it there, not where the server was
// configured; and a library call must not leave its caller's setting changed.
//
// Why a user sets it: an OpenMP team waits at the end of every parallel region for its slowest
// thread, so on a machine shared with other busy processes one engine thread descheduled for a
// time slice stalls the whole step, region after region (docs/engine.md, "Threads").
#pragma once

#include <cstdint>

namespace troupe {

class omp_threads_scope {
 public:
  // threads > 0: the calling thread's parallel regions get teams of that many until the scope
  // ends; 0: nothing changes.
  explicit omp_threads_scope(int32_t threads);
  ~omp_threads_scope();
  omp_threads_scope(const omp_threads_scope&) = delete;
  omp_threads_scope& operator=(const omp_threads_scope&) = delete;

 private:
  int32_t saved_ = 0;  // 0: nothing to put back
};

// The team size the calling thread's parallel regions get now (OMP_NUM_THREADS, else every core
// the process may use, unless a scope or omp_set_num_threads changed it).
int32_t omp_threads_now();

}  // namespace troupe
