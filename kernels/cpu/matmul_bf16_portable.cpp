// The portable bf16-mode back-end and matmul_bf16_reference: dot_bf16 (matmul_bf16.hpp) per
// output, the definition written plainly. Slow (a double per half-step); it exists so bf16 mode
// gives the same bits on CPUs without AVX512_BF16 and so the tests have an oracle.
#include <string>
#include <vector>

#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels {
namespace cpu {
namespace {

int64_t unit_rows(int64_t) { return 16; }

void run(const uint16_t* xb, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, uint16_t*) {
  const auto* wd = static_cast<const uint16_t*>(w.data);
  const int64_t ldx = bf16_padded_cols(w.cols);
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t i = 0; i < n; ++i) y[i * w.rows + j] = dot_bf16(xb + i * ldx, wd + j * w.cols, w.cols);
}

}  // namespace

const matmul_bf16_backend& matmul_bf16_backend_portable() {
  static const matmul_bf16_backend b{"portable", unit_rows, run};
  return b;
}

}  // namespace cpu

void matmul_bf16_reference(const float* x, int64_t n, const weight_ref& w, float* y) {
  if (w.type != dtype::bf16)
    throw_error(errc::unsupported, "matmul_bf16_reference: weight dtype " + std::string(to_string(w.type)) +
                                       " (bf16 compute applies to BF16 weights only)");
  const int64_t kp = cpu::bf16_padded_cols(w.cols);
  std::vector<uint16_t> xb(static_cast<size_t>(kp), 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < w.cols; ++k) xb[k] = f32_to_bf16(x[i * w.cols + k]);
    for (int64_t j = 0; j < w.rows; ++j)
      y[i * w.rows + j] = cpu::dot_bf16(xb.data(), static_cast<const uint16_t*>(w.data) + j * w.cols, w.cols);
  }
}

}  // namespace troupe::kernels
