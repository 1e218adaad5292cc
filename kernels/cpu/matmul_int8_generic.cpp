// Portable INT8 back-end: matmul_int8.hpp's arithmetic written lane by lane in scalar C++, bit-
// identical to the AVX-512 back-ends (integer sums are exact; the float steps are the same fmas).
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

float dot_i8(const quant_activations& a, int64_t i, const weight_ref& w, int64_t j) {
  const int32_t e = a.exp[i];
  if (e == kNonFinite) return std::numeric_limits<float>::quiet_NaN();
  const int16_t* hi = a.hi + i * a.stride;
  const int16_t* lo = a.lo + i * a.stride;
  const auto* q = static_cast<const int8_t*>(w.data) + j * w.cols;
  const int64_t block = int8_block_cols(w);
  float acc[16] = {};
  for (int64_t k0 = 0; k0 < w.cols; k0 += block) {
    const int64_t k1 = k0 + block < w.cols ? k0 + block : w.cols;
    int32_t hs[16] = {}, ls[16] = {};
    for (int64_t k = k0; k < k1; ++k) {
      const int l = static_cast<int>(k % 32) / 2;
      hs[l] += int32_t{hi[k]} * q[k];
      ls[l] += int32_t{lo[k]} * q[k];
    }
    const float s = scale_of(w, j, k0);
    for (int l = 0; l < 16; ++l)
      acc[l] = std::fma(std::fma(static_cast<float>(hs[l]), 32768.0f, static_cast<float>(ls[l])), s, acc[l]);
  }
  return scale_pow2(tree16(acc), -e);
}

size_t scratch_floats(int64_t, const weight_ref&) { return 0; }

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float*, int64_t,
         int64_t) {
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t i = 0; i < a.n; ++i) y[i * w.rows + j] = dot_i8(a, i, w, j);
}

}  // namespace

const quant_backend& int8_backend_generic() {
  static const quant_backend b{"generic", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
