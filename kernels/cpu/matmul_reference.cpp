// Portable scalar matmul with the contract of kernels::matmul: the tests' reference.
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels {

static float weight_at(const weight_ref& w, int64_t r, int64_t c) {
  const int64_t i = r * w.cols + c;
  switch (w.type) {
    case dtype::f32: return static_cast<const float*>(w.data)[i];
    case dtype::bf16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    case dtype::f16: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    default: throw_error(errc::unsupported, "matmul: unsupported weight dtype " + std::string(to_string(w.type)));
  }
}

void matmul_reference(const float* x, int64_t n, const weight_ref& w, float* y) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0.0;  // double: a reference free of float32 summation-order noise
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(x[i * w.cols + k]) * weight_at(w, j, k);
      y[i * w.rows + j] = static_cast<float>(acc);
    }
}

}  // namespace troupe::kernels
