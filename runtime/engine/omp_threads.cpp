#include "runtime/engine/omp_threads.hpp"

#include <omp.h>

namespace troupe {

omp_threads_scope::omp_threads_scope(int32_t threads) {
  if (threads <= 0) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(threads);
}

omp_threads_scope::~omp_threads_scope() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

int32_t omp_threads_now() { return omp_get_max_threads(); }

}  // namespace troupe
