// kernels::matmul in bf16 compute mode (compute_dtype::bf16): the vdpbf16ps back-ends equal the
// portable reference bit for bit (tail, odd cols, every n regime, thread counts), the reference is
// within the fp32 accumulation bound of a float64 dot product of the bf16-rounded activations, the
// DAZ/FTZ and lane order of vdpbf16ps, and the mode leaves other weight dtypes alone. Where the
// mode runs on the AMX tiles (its own bits), the same shapes are held to the float64 bound instead,
// and ctest reruns this binary with TROUPE_ISA=avx512 so that vdpbf16ps is still checked there.
#define BOOST_TEST_MODULE kernels_cpu_matmul_bf16
#include <omp.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/kernels.hpp"

namespace tk = troupe::kernels;
using troupe::dtype;

namespace {

struct bf16_weight {
  std::vector<uint16_t> bits;
  tk::weight_ref ref;
  bf16_weight(int64_t rows, int64_t cols, uint32_t seed, float sd = 0.5f) : bits(static_cast<size_t>(rows * cols)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, sd);
    for (auto& v : bits) v = troupe::f32_to_bf16(dist(rng));
    ref = {bits.data(), dtype::bf16, rows, cols};
  }
};

std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sd);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = dist(rng);  // most are not bf16 values: the rounding is exercised
  return x;
}

std::vector<float> fast(const std::vector<float>& x, int64_t n, const tk::weight_ref& w) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), -1.f);
  tk::matmul(x.data(), n, w, y.data(), tk::compute_dtype::bf16);
  return y;
}

std::vector<float> reference(const std::vector<float>& x, int64_t n, const tk::weight_ref& w) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), -2.f);
  tk::matmul_bf16_reference(x.data(), n, w, y.data());
  return y;
}

bool on_amx() { return std::string(tk::matmul_bf16_isa()) == "amx"; }

// The worst |y - y64| / bound over y: y64 the float64 dot product of the bf16-rounded activations
// and the weights, bound = (cols/16 + 5) * 2^-24 * sum|x w| (the reference's bound, derived at
// reference_within_fp32_accumulation_bound_of_float64).
double worst_against_float64(const std::vector<float>& x, int64_t n, const std::vector<uint16_t>& w, int64_t rows,
                             int64_t cols, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < rows; ++j) {
      double exact = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = static_cast<double>(troupe::bf16_to_f32(troupe::f32_to_bf16(x[i * cols + k]))) *
                         troupe::bf16_to_f32(w[j * cols + k]);
        exact += p, mag += std::fabs(p);
      }
      const double bound = static_cast<double>(cols / 16 + 5) * std::ldexp(1.0, -24) * mag;
      worst = std::max(worst, std::fabs(y[i * rows + j] - exact) / bound);
    }
  return worst;
}

// Index of the first differing float (bits), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(std::min(a.size(), b.size()));
}

}  // namespace

BOOST_AUTO_TEST_CASE(backend_equals_reference_bit_for_bit) {
  BOOST_TEST_MESSAGE("matmul ISA " << tk::matmul_isa());
  struct shape {
    int64_t n, rows, cols;
  };
  // Every regime (decode n <= 3, k chunks for small batches (several, a tail in the last), one row
  // block, several blocks), odd cols, tails of 1..31 columns,
  // rows that leave partial 8-row tiles and units.
  const shape shapes[] = {{1, 13, 1},    {1, 64, 1024},  {2, 37, 33},   {3, 70, 3072}, {3, 9, 31},
                          {8, 50, 1027}, {33, 19, 64},   {33, 97, 255}, {61, 17, 96},  {130, 11, 97},
                          {512, 24, 129}, {4, 8, 32},    {1, 200, 2049}, {16, 40, 3072}, {16, 23, 1000},
                          {5, 17, 300},  {24, 9, 257},   {13, 31, 2048}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    bf16_weight w(s.rows, s.cols, seed++);
    const auto x = random_x(s.n, s.cols, seed++);
    const auto got = fast(x, s.n, w.ref), want = reference(x, s.n, w.ref);
    if (on_amx()) {  // its own bits: the float64 bound, for every output (no -1 left unwritten)
      const double worst = worst_against_float64(x, s.n, w.bits, s.rows, s.cols, got);
      BOOST_TEST(worst <= 1.0, "amx n=" << s.n << " " << s.rows << "x" << s.cols << ": error / bound " << worst);
      continue;
    }
    const int64_t d = first_difference(got, want);
    BOOST_TEST(d == -1, "n=" << s.n << " " << s.rows << "x" << s.cols << ": y[" << d / s.rows << "]["
                              << d % s.rows << "] = " << (d >= 0 ? got[d] : 0) << ", reference "
                              << (d >= 0 ? want[d] : 0));
  }
}

// Extreme exponents: products that underflow, sums flushed to zero, subnormal bf16 weights and
// activations that round to bf16 subnormals (both read as zero), overflow to infinity.
BOOST_AUTO_TEST_CASE(daz_ftz_and_extremes_match_the_reference) {
  if (on_amx()) {
    BOOST_TEST_MESSAGE("AMX: vdpbf16ps's DAZ/FTZ bits are checked by this test's TROUPE_ISA=avx512 run");
    return;
  }
  std::mt19937 rng(99);
  const int64_t n = 5, rows = 16, cols = 96;
  bf16_weight w(rows, cols, 7);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (size_t i = 0; i < w.bits.size(); ++i) {
    const uint32_t e = rng() % 256 == 0 ? 0 : 1 + rng() % 254;  // ~1/256 subnormal, the rest any normal
    w.bits[i] = static_cast<uint16_t>(((rng() & 1u) << 15) | (e << 7) | (rng() & 0x7fu));
  }
  for (auto& v : x) {
    const int e = static_cast<int>(rng() % 200) - 100;
    v = std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.f, e) * ((rng() & 1u) ? -1.f : 1.f);
  }
  const auto got = fast(x, n, w.ref), want = reference(x, n, w.ref);
  const int64_t d = first_difference(got, want);
  BOOST_TEST(d == -1, "first difference at " << d << ": " << (d >= 0 ? got[d] : 0) << " vs "
                                             << (d >= 0 ? want[d] : 0));
}

// The definition itself, on hand-made lanes: odd column first, DAZ, FTZ.
BOOST_AUTO_TEST_CASE(reference_lane_order_daz_and_ftz) {
  using tk::cpu::dot_bf16;
  // Lane 0 over two 32-column blocks: block 0 leaves acc = 1 (odd column 1: 1 x 1); block 1 has
  // odd product 2^-24 and even product 2^-24 + 2^-31.
  //   odd first:  1 + 2^-24 -> 1 (tie, to even), then 1 + 2^-24 + 2^-31 -> 1 + 2^-23
  //   even first: 1 + 2^-24 + 2^-31 -> 1 + 2^-23, then 1 + 2^-23 + 2^-24 -> 1 + 2^-22 (tie, to even)
  std::vector<uint16_t> xb(64, 0), w(64, 0);
  const uint16_t one = troupe::f32_to_bf16(1.f);
  xb[1] = one, w[1] = one;
  xb[33] = troupe::f32_to_bf16(std::ldexp(1.f, -24)), w[33] = one;
  xb[32] = troupe::f32_to_bf16(std::ldexp(1.f + std::ldexp(1.f, -7), -24)), w[32] = one;
  BOOST_TEST(dot_bf16(xb.data(), w.data(), 64) == 1.f + std::ldexp(1.f, -23));

  // DAZ: a subnormal bf16 weight reads as zero.
  std::vector<uint16_t> xs(32, 0), ws(32, 0);
  xs[0] = troupe::f32_to_bf16(std::ldexp(1.f, 100));
  ws[0] = 0x0001;  // the smallest bf16 subnormal: 2^-133; the product would be 2^-33
  BOOST_TEST(dot_bf16(xs.data(), ws.data(), 32) == 0.f);
  // FTZ: 2^-70 * 2^-70 = 2^-140 is a float subnormal: flushed.
  xs[0] = troupe::f32_to_bf16(std::ldexp(1.f, -70));
  ws[0] = troupe::f32_to_bf16(std::ldexp(1.f, -70));
  BOOST_TEST(dot_bf16(xs.data(), ws.data(), 32) == 0.f);
  // ... while 2^-60 * 2^-60 = 2^-120 is normal and kept.
  xs[0] = troupe::f32_to_bf16(std::ldexp(1.f, -60));
  ws[0] = troupe::f32_to_bf16(std::ldexp(1.f, -60));
  BOOST_TEST(dot_bf16(xs.data(), ws.data(), 32) == std::ldexp(1.f, -120));
}

// The reference against float64 on the same bf16-rounded activations: each output is at most
// cols/16 sequential adds per lane plus 4 tree adds, each rounding by at most 2^-24 relative to a
// partial sum bounded by sum|x w|, so |y - y64| <= (cols/16 + 4) * 2^-24 * sum|x w| (first order;
// the products themselves are exact).
BOOST_AUTO_TEST_CASE(reference_within_fp32_accumulation_bound_of_float64) {
  for (int64_t cols : {1, 33, 1024, 3072}) {
    const int64_t n = 2, rows = 16;
    bf16_weight w(rows, cols, static_cast<uint32_t>(cols));
    const auto x = random_x(n, cols, static_cast<uint32_t>(cols + 1));
    const double worst = worst_against_float64(x, n, w.bits, rows, cols, reference(x, n, w.ref));
    BOOST_TEST(worst <= 1.0, "cols " << cols << ": worst error / bound " << worst);
    BOOST_TEST_MESSAGE("cols " << cols << ": worst error / bound " << worst);
  }
}

// A row's result never depends on n, its neighbours or the thread count.
BOOST_AUTO_TEST_CASE(batch_and_thread_invariance_bitwise) {
  BOOST_TEST_MESSAGE("bf16 back-end " << tk::matmul_bf16_isa());
  // Ragged rows and cols (AMX: padded panels), then whole tiles read in place.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{200, 1027}, {96, 1024}}) {
    bf16_weight w(rows, cols, static_cast<uint32_t>(cols));
    const auto x = random_x(100, cols, 6);
    const int saved = omp_get_max_threads();
    std::vector<float> base;
    {
      omp_set_num_threads(1);
      std::vector<float> one(static_cast<size_t>(rows));
      for (int64_t i = 0; i < 100; ++i) {
        tk::matmul(x.data() + i * cols, 1, w.ref, one.data(), tk::compute_dtype::bf16);
        base.insert(base.end(), one.begin(), one.end());
      }
    }
    for (int threads : {1, 2, 3, 5})
      for (int64_t n : {2, 3, 4, 7, 32, 61, 100}) {
        omp_set_num_threads(threads);
        std::vector<float> xs(x.begin(), x.begin() + n * cols);
        const auto y = fast(xs, n, w.ref);
        BOOST_TEST(std::memcmp(y.data(), base.data(), y.size() * sizeof(float)) == 0,
                   "n=" << n << ", " << threads << " threads, " << rows << "x" << cols << ": rows differ from n=1");
      }
    omp_set_num_threads(saved);
  }
}

// A NaN or infinity in one activation row stays in that row's outputs (the AMX back-end computes
// 16 rows to a tile; its neighbours must not see it).
BOOST_AUTO_TEST_CASE(non_finite_rows_stay_their_own) {
  const int64_t n = 20, rows = 40, cols = 64;
  bf16_weight w(rows, cols, 21);
  auto x = random_x(n, cols, 22);
  x[3 * cols + 7] = std::nanf("");
  x[17 * cols + 60] = std::numeric_limits<float>::infinity();
  const auto y = fast(x, n, w.ref);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < rows; ++j) {
      const float v = y[i * rows + j];
      if (i == 3) BOOST_TEST(std::isnan(v), "row 3 col " << j << " = " << v);
      else if (i == 17) BOOST_TEST(!std::isfinite(v), "row 17 col " << j << " = " << v);
      else BOOST_TEST(std::isfinite(v), "row " << i << " col " << j << " = " << v);
    }
}

// Only BF16 weights change arithmetic: f32 / f16 weights give matmul()'s bits in bf16 mode, and
// BF16 weights really take the bf16 path (the results differ from the f32 mode's).
BOOST_AUTO_TEST_CASE(mode_applies_to_bf16_weights_only) {
  const int64_t n = 4, rows = 24, cols = 80;
  const auto x = random_x(n, cols, 11);
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  std::vector<uint16_t> wh(wf.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 0.5f);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = dist(rng), wh[i] = troupe::f32_to_f16(wf[i]);
  for (const tk::weight_ref w : {tk::weight_ref{wf.data(), dtype::f32, rows, cols},
                                 tk::weight_ref{wh.data(), dtype::f16, rows, cols}}) {
    std::vector<float> a(static_cast<size_t>(n * rows)), b(a.size());
    tk::matmul(x.data(), n, w, a.data());
    tk::matmul(x.data(), n, w, b.data(), tk::compute_dtype::bf16);
    BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, troupe::to_string(w.type));
  }
  bf16_weight w(rows, cols, 12);
  std::vector<float> exact(static_cast<size_t>(n * rows));
  tk::matmul(x.data(), n, w.ref, exact.data(), tk::compute_dtype::f32);
  std::vector<float> plain(exact.size());
  tk::matmul(x.data(), n, w.ref, plain.data());
  BOOST_TEST(std::memcmp(exact.data(), plain.data(), exact.size() * sizeof(float)) == 0);
  BOOST_TEST(first_difference(fast(x, n, w.ref), exact) != -1);
}
