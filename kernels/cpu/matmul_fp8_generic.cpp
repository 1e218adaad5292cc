// Portable FP8 (e4m3, block scales) back-end: matmul_int8.hpp's FP8 arithmetic in scalar C++,
// bit-identical to the AVX-512 back-end (same widened values, same fma sequence per lane).
#include <array>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {

// v * 2^-8 for every code, as the AVX-512 back-end widens it through f16 bits: codes 0x7f / 0xff
// (NaN in e4m3) read as +-480 there, so they do here too (quantizers never write them).
const std::array<float, 256>& widened_codes() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) {
      const bool nan = (c & 0x7f) == 0x7f;
      const float v = nan ? ((c & 0x80) ? -480.0f : 480.0f) : f8e4m3_to_f32(static_cast<uint8_t>(c));
      t[static_cast<size_t>(c)] = std::ldexp(v, -8);
    }
    return t;
  }();
  return table;
}

float dot_f8(const quant_activations& a, int64_t i, const weight_ref& w, int64_t j) {
  const auto& table = widened_codes();
  const float* x = a.x + i * a.stride;
  const auto* q = static_cast<const uint8_t*>(w.data) + j * w.cols;
  const int64_t group = w.group_cols < w.cols ? w.group_cols : w.cols;
  float acc[16] = {};
  for (int64_t g0 = 0; g0 < w.cols; g0 += group) {
    const int64_t g1 = g0 + group < w.cols ? g0 + group : w.cols;
    float p[16] = {};
    for (int64_t k = g0; k < g1; ++k) {
      const int l = static_cast<int>(k % 16);
      p[l] = std::fma(x[k], table[q[k]], p[l]);
    }
    const float s = scale_of(w, j, g0) * 256.0f;
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(p[l], s, acc[l]);
  }
  return tree16(acc);
}

size_t scratch_floats(int64_t, const weight_ref&) { return 0; }

void run(const quant_activations& a, const weight_ref& w, int64_t j0, int64_t j1, float* y, float*, int64_t,
         int64_t) {
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t i = 0; i < a.n; ++i) y[i * w.rows + j] = dot_f8(a, i, w, j);
}

}  // namespace

const quant_backend& fp8_backend_generic() {
  static const quant_backend b{"generic", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
