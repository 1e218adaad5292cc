// Helpers the matmul suites share: random activations, one call into a fresh vector, bitwise equality.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.hpp"

namespace troupe::kernels::test {

// n rows of cols normal floats (sd 1): most use all 24 mantissa bits and are not bf16 values.
inline std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = dist(rng);
  return x;
}

// y = x · wᵀ in compute mode `compute`, y pre-filled with -1 so that an unwritten output shows.
inline std::vector<float> run(const float* x, int64_t n, const weight_ref& w, compute_dtype compute = compute_dtype::f32) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), -1.f);
  matmul(x, n, w, y.data(), compute);
  return y;
}

inline bool same_bits(const float* a, const float* b, int64_t count) {
  return std::memcmp(a, b, static_cast<size_t>(count) * sizeof(float)) == 0;
}

}  // namespace troupe::kernels::test
