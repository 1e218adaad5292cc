// kernels::matmul in f32 compute on the AMX tiles (f32_arithmetic() == "amx": BF16 weights where the
// CPU has AMX-BF16): the three-way split of x is exact (a one-column product returns x itself),
// results are within the fp32 accumulation bound of a float64 dot product of the unrounded x,
// bitwise invariant across n (narrow, decode and prefill tile layouts), positions and threads, and
// non-finite values stay in their row or column. Elsewhere (no AMX, or TROUPE_ISA=avx512 and lower)
// the cases say so and pass: the FMA path has its own suite (matmul_test.cpp).
#define BOOST_TEST_MODULE kernels_cpu_matmul_f32_amx
#include <omp.h>

#include <boost/test/unit_test.hpp>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "tests/kernels/cpu/matmul_test_helpers.hpp"

namespace tk = troupe::kernels;
using troupe::dtype;
using tk::test::random_x, tk::test::run, tk::test::same_bits;  // random_x: full 24-bit mantissas

namespace {

bool on_tiles() {
  if (std::string(tk::f32_arithmetic()) == "amx") return true;
  BOOST_TEST_MESSAGE("f32 arithmetic here is " << tk::f32_arithmetic() << ": nothing to check");
  return false;
}

struct bf16_weight {
  std::vector<uint16_t> bits;
  tk::weight_ref ref;
  bf16_weight(int64_t rows, int64_t cols, uint32_t seed) : bits(static_cast<size_t>(rows * cols)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 0.5f);
    for (auto& v : bits) v = troupe::f32_to_bf16(dist(rng));
    ref = {bits.data(), dtype::bf16, rows, cols};
  }
};

}  // namespace

// y = x * 1 and y = x * -2 must come back exactly for x of every magnitude: hi + mid + lo = x and
// each part's product is exact. Dropping the third part would lose up to 8 of x's 24 bits.
BOOST_AUTO_TEST_CASE(split_of_x_is_exact) {
  if (!on_tiles()) return;
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> expo(-100, 100);
  for (int64_t cols : {1, 33, 64}) {
    for (uint16_t wbits : {uint16_t{0x3f80} /* 1 */, uint16_t{0xc000} /* -2 */}) {
      // One weight row: wbits in column cols - 1 (the ragged tail block where cols % 32 != 0), zeros elsewhere.
      std::vector<uint16_t> w(static_cast<size_t>(cols), 0);
      w.back() = wbits;
      const tk::weight_ref ref{w.data(), dtype::bf16, 1, cols};
      const float scale = troupe::bf16_to_f32(wbits);
      for (int64_t n : {1, 5, 20, 40}) {  // narrow, decode (2 groups) and prefill layouts
        std::vector<float> x(static_cast<size_t>(n * cols), 0.f);
        for (int64_t i = 0; i < n; ++i) {
          float v = std::ldexp(1.f + static_cast<float>(mant(rng)) * 0x1p-23f, expo(rng));
          if (i % 2) v = -v;
          if (i == 0) v = FLT_MAX;  // hi truncates, so even the largest float splits exactly (w = 1)
          x[static_cast<size_t>(i * cols + cols - 1)] = v;
        }
        const auto y = run(x.data(), n, ref);
        for (int64_t i = 0; i < n; ++i) {
          const float want = x[static_cast<size_t>(i * cols + cols - 1)] * scale;  // exact, or inf for FLT_MAX * -2
          BOOST_TEST((std::memcmp(&y[i], &want, sizeof(float)) == 0),
                     "cols=" << cols << " n=" << n << " row " << i << ": " << y[i] << " != " << want);
        }
      }
    }
  }
}

// |y - y64| <= (cols/16 + 5) * 2^-24 * sum|x w| (the FMA path's kind of bound) with y64 the float64
// dot product of the unrounded x: the split costs no precision.
BOOST_AUTO_TEST_CASE(within_fp32_accumulation_bound_of_float64) {
  if (!on_tiles()) return;
  const int64_t shapes[][2] = {{7, 16}, {13, 31}, {50, 32}, {97, 160}, {33, 1000}, {130, 1024}, {37, 2500}, {20, 3072}};
  double worst_all = 0;
  for (auto [rows, cols] : shapes) {
    bf16_weight w(rows, cols, static_cast<uint32_t>(rows + cols));
    for (int64_t n : {1, 3, 17, 40}) {
      const auto x = random_x(n, cols, static_cast<uint32_t>(n * 7 + cols));
      const auto y = run(x.data(), n, w.ref);
      double worst = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < rows; ++j) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < cols; ++k) {
            const double p = static_cast<double>(x[i * cols + k]) * troupe::bf16_to_f32(w.bits[j * cols + k]);
            exact += p, mag += std::fabs(p);
          }
          const double bound = static_cast<double>(cols / 16 + 5) * std::ldexp(1.0, -24) * mag;
          worst = std::max(worst, std::fabs(y[i * rows + j] - exact) / bound);
        }
      BOOST_TEST(worst <= 1.0, "[" << rows << "x" << cols << "] n=" << n << ": " << worst << " of the bound");
      worst_all = std::max(worst_all, worst);
    }
  }
  BOOST_TEST_MESSAGE("worst error: " << worst_all << " of the bound");
}

// A row alone (n = 1, narrow tiles) gives the bits of the same row in any batch: one or two groups
// of column-pair tiles (decode) or row tiles (prefill), any offset, any thread count.
BOOST_AUTO_TEST_CASE(batch_and_thread_invariance_bitwise) {
  if (!on_tiles()) return;
  const int saved = omp_get_max_threads();
  const int64_t shapes[][2] = {{200, 1024}, {97, 160}, {53, 48}, {50, 2500}};
  for (auto [rows, cols] : shapes) {
    bf16_weight w(rows, cols, 7);
    const int64_t max_n = 100;
    const auto x = random_x(max_n, cols, 11);
    std::vector<float> alone(static_cast<size_t>(max_n * rows));
    for (int64_t i = 0; i < max_n; ++i) tk::matmul(x.data() + i * cols, 1, w.ref, alone.data() + i * rows);
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (int64_t n : {2, 3, 5, 15, 16, 17, 31, 32, 33, 48, 100})
        for (int64_t first : {int64_t{0}, (max_n - n) / 2, max_n - n}) {
          const auto y = run(x.data() + first * cols, n, w.ref);
          BOOST_TEST(same_bits(y.data(), alone.data() + first * rows, n * rows),
                     "[" << rows << "x" << cols << "] n=" << n << " first=" << first << " threads=" << threads);
        }
    }
  }
  omp_set_num_threads(saved);
}

// An infinite x stays in its row, a NaN weight in its column; FLT_MAX * 1 stays finite.
BOOST_AUTO_TEST_CASE(non_finite_values_stay_in_their_row_and_column) {
  if (!on_tiles()) return;
  for (int64_t n : {1, 5, 20, 40}) {
    bf16_weight w(20, 40, 29);
    w.bits[3 * 40 + 17] = 0x7fc1;  // NaN
    auto x = random_x(n, 40, 31);
    const int64_t bad = n / 2;
    x[bad * 40 + 5] = INFINITY;
    const auto y = run(x.data(), n, w.ref);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < 20; ++j) {
        const float v = y[i * 20 + j];
        if (j == 3 || i == bad)
          BOOST_TEST(!std::isfinite(v), "n=" << n << " y[" << i << "][" << j << "] = " << v);
        else
          BOOST_TEST(std::isfinite(v), "n=" << n << " y[" << i << "][" << j << "] = " << v);
      }
  }
}
