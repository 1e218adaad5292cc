// What the device test suites of the CUDA engine and of serving on it share: cases that need a
// device exit 77 without one (SKIP_RETURN_CODE: ctest lists them as skipped), and the golden data
// is found through $TROUPE_TEST_DATA_DIR when set (the device box runs a copy of the tree at
// another path), else the source tree's tests/data. Include it before golden.hpp.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/device.hpp"

namespace troupe::testing {

inline constexpr int kSkipCode = 77;
inline constexpr char kCompiledDataDir[] = TROUPE_TEST_DATA_DIR;

inline const char* cuda_test_data_dir() {
  const char* e = std::getenv("TROUPE_TEST_DATA_DIR");
  return e != nullptr && *e != '\0' ? e : kCompiledDataDir;
}

inline void require_device() {
  if (kernels::cuda::device_count() == 0) {
    std::printf("SKIP: no CUDA device (this case needs one)\n");
    std::fflush(stdout);
    std::exit(kSkipCode);
  }
  BOOST_TEST_MESSAGE("device: " << kernels::cuda::describe_device(0));
}

}  // namespace troupe::testing

#undef TROUPE_TEST_DATA_DIR
#define TROUPE_TEST_DATA_DIR ::troupe::testing::cuda_test_data_dir()
