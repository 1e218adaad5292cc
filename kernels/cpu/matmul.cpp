// PLACEHOLDER until the SIMD matmul lands: 16-lane dot products, parallel over output rows.
#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels {

const char* matmul_isa() noexcept { return "generic"; }

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void dot_rows(const float* x, int64_t n, const float* wrow, int64_t cols, int64_t ldy, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    float acc[16] = {};
    const float* xr = x + i * cols;
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16)
      for (int l = 0; l < 16; ++l) acc[l] += xr[k + l] * wrow[k + l];
    for (int l = 0; k + l < cols; ++l) acc[l] += xr[k + l] * wrow[k + l];
    for (int w = 8; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    y[i * ldy] = acc[0];
  }
}

void matmul(const float* x, int64_t n, const weight_ref& w, float* y) {
  if (w.type != dtype::f32 && w.type != dtype::bf16 && w.type != dtype::f16)
    throw_error(errc::unsupported, "matmul: unsupported weight dtype " + std::string(to_string(w.type)));
#pragma omp parallel
  {
    std::vector<float> row(w.cols);
#pragma omp for schedule(static)
    for (int64_t j = 0; j < w.rows; ++j) {
      const float* wr;
      if (w.type == dtype::f32) {
        wr = static_cast<const float*>(w.data) + j * w.cols;
      } else {
        auto* s = static_cast<const uint16_t*>(w.data) + j * w.cols;
        for (int64_t k = 0; k < w.cols; ++k)
          row[k] = w.type == dtype::bf16 ? bf16_to_f32(s[k]) : f16_to_f32(s[k]);
        wr = row.data();
      }
      dot_rows(x, n, wr, w.cols, w.rows, y + j);
    }
  }
}

}  // namespace troupe::kernels
