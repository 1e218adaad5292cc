// Portable matmul back-end: the 16-lane dot product of matmul_backend.hpp written in scalar C++
// (float weights, and quantized ones widened to value * scale, matmul_quant.hpp).
// std::fma keeps it bit-identical to the SIMD back-ends; on x86 CPUs without FMA hardware that is
// a (slow, exact) libm call, which is acceptable for the fallback of a fallback.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_quant.hpp"

namespace troupe::kernels::cpu {
namespace {

struct widen_f32 {
  using elem = float;
  static float get(float v) { return v; }
};
struct widen_bf16 {
  using elem = uint16_t;
  static float get(uint16_t v) { return bf16_to_f32(v); }
};
struct widen_f16 {
  using elem = uint16_t;
  static float get(uint16_t v) { return f16_to_f32(v); }
};

template <class Widen>
float dot16(const float* x, const typename Widen::elem* w, int64_t cols) {
  float acc[16] = {};
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16)
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(x[k + l], Widen::get(w[k + l]), acc[l]);
  // The zero-padded tail: fma(0, 0, acc) == acc, because an accumulator that starts at +0 is never -0.
  for (int l = 0; k + l < cols; ++l) acc[l] = std::fma(x[k + l], Widen::get(w[k + l]), acc[l]);
  for (int half = 8; half > 0; half /= 2)
    for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
  return acc[0];
}

template <class Widen>
void run_rows(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  const auto* wd = static_cast<const typename Widen::elem*>(w.data);
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t i = 0; i < n; ++i) y[i * w.rows + j] = dot16<Widen>(x + i * w.cols, wd + j * w.cols, w.cols);
}

// Quantized rows (matmul_quant.hpp): each row widened once to the float32 value * scale, then the
// float dot product, as the SIMD back-ends widen the codes in their tiles.
void run_quant_rows(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t j = j0; j < j1; ++j) {
    for (int64_t k = 0; k < w.cols; ++k) row[static_cast<size_t>(k)] = dequantized_at(w, j, k);
    for (int64_t i = 0; i < n; ++i) y[i * w.rows + j] = dot16<widen_f32>(x + i * w.cols, row.data(), w.cols);
  }
}

int64_t unit_rows(int64_t, const weight_ref&) { return 16; }
size_t scratch_floats(int64_t, const weight_ref&) { return 0; }

void run(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float*) {
  switch (w.type) {
    case dtype::f32: return run_rows<widen_f32>(x, n, w, j0, j1, y);
    case dtype::bf16: return run_rows<widen_bf16>(x, n, w, j0, j1, y);
    case dtype::f16: return run_rows<widen_f16>(x, n, w, j0, j1, y);
    case dtype::i8:
    case dtype::u4:
    case dtype::f8_e4m3: return run_quant_rows(x, n, w, j0, j1, y);
    default: return;
  }
}

}  // namespace

const matmul_backend& matmul_backend_generic() {
  static const matmul_backend b{"generic", unit_rows, scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
