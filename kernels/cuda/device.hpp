// CUDA backend entry points visible to plain C++ (no CUDA headers here). The CUDA kernels
// that implement kernels/kernels.hpp on device memory land beside this file (CUDA issue).
#pragma once

#include <string>

namespace troupe::kernels::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int device_count() noexcept;
// "NVIDIA H200 (sm_90, 139 GiB)" for device i, or the CUDA error text.
std::string describe_device(int i);

}  // namespace troupe::kernels::cuda
