// kernels::matmul: closeness to the double-precision reference, bitwise batch invariance (a row's
// result never depends on n, its neighbours or the thread count), bitwise agreement of every
// back-end this CPU can run (the FMA contract; BF16 weights on the AMX tiles have their own bits,
// matmul_f32_amx_test.cpp), and the errors for bad calls.
#define BOOST_TEST_MODULE kernels_cpu_matmul
#include <omp.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"
#include "tests/kernels/cpu/matmul_test_helpers.hpp"

namespace tk = troupe::kernels;
using troupe::dtype;
using tk::test::random_x, tk::test::run, tk::test::same_bits;

namespace {

// A weight matrix in one checkpoint dtype, built from normal floats rounded to that dtype.
struct test_weight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  tk::weight_ref ref;

  test_weight(dtype t, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 0.5f);
    const auto count = static_cast<size_t>(rows * cols);
    ref = {nullptr, t, rows, cols};
    if (t == dtype::f32) {
      f32.resize(count);
      for (auto& v : f32) v = dist(rng);
      ref.data = f32.data();
    } else {
      half.resize(count);
      for (auto& v : half) v = t == dtype::bf16 ? troupe::f32_to_bf16(dist(rng)) : troupe::f32_to_f16(dist(rng));
      // A few subnormal / tiny f16 weights: widening must stay exact.
      if (t == dtype::f16 && count > 3) half[1] = 0x0001, half[2] = 0x83ff;
      ref.data = half.data();
    }
  }
};


// |y - ref| <= 1e-5 * (largest |ref| of that row), element by element.
void check_close(const std::vector<float>& y, const std::vector<float>& ref, int64_t n, int64_t rows,
                 const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    float scale = 1e-30f;
    for (int64_t j = 0; j < rows; ++j) scale = std::max(scale, std::fabs(ref[i * rows + j]));
    for (int64_t j = 0; j < rows; ++j) {
      const float d = std::fabs(y[i * rows + j] - ref[i * rows + j]);
      if (!(d <= 1e-5f * scale)) {
        BOOST_ERROR(what << ": y[" << i << "][" << j << "] = " << y[i * rows + j] << ", reference "
                         << ref[i * rows + j] << " (row scale " << scale << ")");
        return;
      }
    }
  }
}

const dtype all_types[] = {dtype::f32, dtype::bf16, dtype::f16};

std::string name(dtype t, int64_t rows, int64_t cols) {
  return std::string(troupe::to_string(t)) + " [" + std::to_string(rows) + "x" + std::to_string(cols) + "]";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(matmul)

// TROUPE_ISA picks the back-end (ctest runs this binary once per ISA the CPU has).
BOOST_AUTO_TEST_CASE(isa_follows_environment) {
  const char* env = std::getenv("TROUPE_ISA");
  const std::string want = env ? env : "";
  const std::string got = tk::matmul_isa();
  BOOST_TEST_MESSAGE("matmul ISA: " << got);
  BOOST_TEST_MESSAGE("bf16 compute: " << tk::matmul_bf16_isa());
  BOOST_TEST_MESSAGE("f32 arithmetic of BF16 weights: " << tk::f32_arithmetic());
  if (want == "avx512" || want == "avx2" || want == "generic") {
    BOOST_TEST(got == want);
    BOOST_TEST(std::string(tk::matmul_bf16_isa()) != "amx");  // AMX only on request or by default
    BOOST_TEST(std::string(tk::f32_arithmetic()) == "fma");
  } else if (want == "amx" && got != "invalid") {  // f32 / F16 weights stay AVX-512; BF16 runs on the tiles
    BOOST_TEST(got == "avx512");
    BOOST_TEST(std::string(tk::matmul_bf16_isa()) == "amx");
    BOOST_TEST(std::string(tk::f32_arithmetic()) == "amx");
  } else if (!want.empty() && want != "auto") {  // an unknown name is refused at the first call
    BOOST_TEST(got == "invalid");
    test_weight w(dtype::f32, 4, 4, 1);
    std::vector<float> x(4, 1.f), y(4);
    try {
      tk::matmul(x.data(), 1, w.ref, y.data());
      BOOST_ERROR("matmul accepted TROUPE_ISA=" << want);
    } catch (const troupe::error& e) {
      BOOST_TEST((e.code() == troupe::errc::invalid_argument));
      BOOST_TEST(std::string(e.what()).find("TROUPE_ISA=" + want) != std::string::npos);
    }
  } else {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    BOOST_TEST(got == (avx512 ? "avx512" : avx2 ? "avx2" : "generic"));
    BOOST_TEST(std::string(tk::f32_arithmetic()) == (std::string(tk::matmul_bf16_isa()) == "amx" ? "amx" : "fma"));
  }
}

// Shapes around every tile and lane boundary, including the golden test models' 32/48/64/96/160.
BOOST_AUTO_TEST_CASE(matches_reference) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  // cols 2048 and 2500: several k blocks, partial sums carried between them.
  const int64_t shapes[][2] = {{1, 1},   {3, 5},   {7, 16},   {8, 17},    {13, 31},    {50, 32},  {96, 48},
                               {49, 64}, {64, 96}, {97, 160}, {33, 1000}, {130, 1024}, {21, 2048}, {37, 2500}};
  for (dtype t : all_types)
    for (auto [rows, cols] : shapes) {
      test_weight w(t, rows, cols, static_cast<uint32_t>(rows * 131 + cols));
      for (int64_t n : {1, 2, 3, 4, 5, 9, 17}) {
        auto x = random_x(n, cols, static_cast<uint32_t>(n + cols));
        std::vector<float> ref(static_cast<size_t>(n * rows));
        tk::matmul_reference(x.data(), n, w.ref, ref.data());
        check_close(run(x.data(), n, w.ref), ref, n, rows, name(t, rows, cols) + " n=" + std::to_string(n));
      }
    }
}

// Row i of a batch is bit-identical to the same row computed alone, for every batch size.
BOOST_AUTO_TEST_CASE(batch_invariant) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  const bool slow = std::string(tk::matmul_isa()) == "generic";
  const int64_t shapes[][2] = {{200, 1024}, {97, 160}, {53, 48}, {50, 2500}};
  for (dtype t : all_types)
    for (auto [rows, cols] : shapes) {
      test_weight w(t, rows, cols, 7);
      const int64_t max_n = slow ? 100 : 513;
      auto x = random_x(max_n, cols, 11);
      // Each row alone (n = 1): the result every batch must reproduce.
      std::vector<float> alone(static_cast<size_t>(max_n * rows));
      for (int64_t i = 0; i < max_n; ++i) tk::matmul(x.data() + i * cols, 1, w.ref, alone.data() + i * rows);
      for (int64_t n : {2, 3, 4, 7, 32, 100, 513}) {
        if (n > max_n) continue;
        // Batches start at different rows so each row meets different neighbours and tile slots.
        for (int64_t first : {int64_t{0}, (max_n - n) / 2, max_n - n}) {
          auto y = run(x.data() + first * cols, n, w.ref);
          BOOST_TEST(same_bits(y.data(), alone.data() + first * rows, n * rows),
                     name(t, rows, cols) << " n=" << n << " first=" << first);
        }
      }
    }
}

// The thread count (hence the split of weight rows) never changes a bit.
BOOST_AUTO_TEST_CASE(thread_count_invariant) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  const int saved = omp_get_max_threads();
  for (dtype t : all_types) {
    test_weight w(t, 1000, 256, 3);
    for (int64_t n : {1, 3, 8, 40}) {
      auto x = random_x(n, 256, 5);
      omp_set_num_threads(1);
      auto one = run(x.data(), n, w.ref);
      for (int threads : {2, 3, 5}) {
        omp_set_num_threads(threads);
        auto many = run(x.data(), n, w.ref);
        BOOST_TEST(same_bits(one.data(), many.data(), n * w.ref.rows),
                   name(t, 1000, 256) << " n=" << n << " threads=" << threads);
      }
    }
  }
  omp_set_num_threads(saved);
}

// Every back-end this CPU can run gives the portable back-end's bits, and so does matmul() wherever it
// runs the FMA contract (so results do not depend on the machine's instruction set either; BF16
// weights on the AMX tiles are the exception, f32_arithmetic()).
BOOST_AUTO_TEST_CASE(backends_agree_bitwise) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  namespace cpu = tk::cpu;
  const auto backends = cpu::runnable_matmul_backends();
  const bool tiles = std::string(tk::f32_arithmetic()) == "amx";
  const int64_t shapes[][2] = {{61, 333}, {20, 1024}, {13, 7}, {19, 3072}};
  for (dtype t : all_types)
    for (auto [rows, cols] : shapes) {
      test_weight w(t, rows, cols, 19);
      for (int64_t n : {1, 2, 3, 6, 13, 70}) {
        auto x = random_x(n, cols, 23);
        std::vector<float> expect(static_cast<size_t>(n * rows));
        cpu::matmul_backend_generic().run(x.data(), n, w.ref, 0, rows, expect.data(), nullptr);
        if (!(tiles && t == dtype::bf16))
          BOOST_TEST(same_bits(run(x.data(), n, w.ref).data(), expect.data(), n * rows), "matmul() " << name(t, rows, cols) << " n=" << n);
        for (const auto* b : backends) {
          std::vector<float> y(static_cast<size_t>(n * rows));
          std::vector<float> scratch(b->scratch_floats(n, w.ref) + 16);
          auto* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
          b->run(x.data(), n, w.ref, 0, rows, y.data(), aligned);
          BOOST_TEST(same_bits(y.data(), expect.data(), n * rows), b->name << " " << name(t, rows, cols) << " n=" << n);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(special_values_stay_in_their_row_and_column) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  test_weight w(dtype::f32, 20, 40, 29);
  w.f32[3 * 40 + 17] = std::nanf("");
  auto x = random_x(5, 40, 31);
  x[2 * 40 + 5] = INFINITY;
  auto y = run(x.data(), 5, w.ref);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 20; ++j) {
      const float v = y[i * 20 + j];
      if (j == 3 || i == 2)
        BOOST_TEST(!std::isfinite(v), "y[" << i << "][" << j << "] = " << v);  // NaN, or inf*w
      else
        BOOST_TEST(std::isfinite(v), "y[" << i << "][" << j << "] = " << v);
    }
}

BOOST_AUTO_TEST_CASE(empty_shapes) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  test_weight w(dtype::bf16, 3, 0, 1);
  std::vector<float> y(6, -1.f);
  tk::matmul(nullptr, 2, w.ref, y.data());  // cols = 0: every dot product is empty, +0
  for (float v : y) BOOST_TEST((v == 0.f && !std::signbit(v)));
  std::vector<float> untouched(4, -1.f);
  test_weight w2(dtype::f32, 2, 2, 1);
  tk::matmul(nullptr, 0, w2.ref, untouched.data());  // n = 0: nothing to do
  for (float v : untouched) BOOST_TEST(v == -1.f);
}

// Products of one x in one call (q/k/v, gate/up) give each product the bits of its own call,
// whatever the mix of sizes, dtypes, compute modes and thread counts.
BOOST_AUTO_TEST_CASE(products_in_one_call_equal_their_own_calls) {
  if (std::string(tk::matmul_isa()) == "invalid") return;
  const int saved = omp_get_max_threads();
  const int64_t cols = 200;
  test_weight q(dtype::bf16, 300, cols, 41), k(dtype::bf16, 40, cols, 43), v(dtype::f16, 7, cols, 47),
      empty(dtype::f32, 0, cols, 53), f(dtype::f32, 520, cols, 59);
  const tk::weight_ref* ws[] = {&q.ref, &k.ref, &v.ref, &empty.ref, &f.ref};
  for (auto compute : {tk::compute_dtype::f32, tk::compute_dtype::bf16})
    for (int threads : {1, 2, 3})
      for (int64_t n : {1, 3, 5, 12, 70}) {
        omp_set_num_threads(threads);
        auto x = random_x(n, cols, 61);
        std::vector<std::vector<float>> one, many;
        std::vector<tk::matmul_out> outs;
        for (const auto* w : ws) {
          one.emplace_back(static_cast<size_t>(n * w->rows), -1.f);
          tk::matmul(x.data(), n, *w, one.back().data(), compute);
          many.emplace_back(static_cast<size_t>(n * w->rows), -2.f);
        }
        for (size_t i = 0; i < many.size(); ++i) outs.push_back({*ws[i], many[i].data()});
        tk::matmul(x.data(), n, outs, compute);
        for (size_t i = 0; i < many.size(); ++i)
          BOOST_TEST(same_bits(one[i].data(), many[i].data(), n * ws[i]->rows),
                     name(ws[i]->type, ws[i]->rows, cols)
                         << " product " << i << " n=" << n << " threads=" << threads
                         << " compute=" << (compute == tk::compute_dtype::f32 ? "f32" : "bf16"));
      }
  omp_set_num_threads(saved);
}

BOOST_AUTO_TEST_CASE(rejects_bad_calls) {
  std::vector<float> x(16, 1.f), y(16);
  std::vector<int32_t> q(16);
  auto expect = [](auto&& call, troupe::errc code, const std::string& needle) {
    try {
      call();
      BOOST_ERROR("no error; expected one mentioning '" << needle << "'");
    } catch (const troupe::error& e) {
      BOOST_TEST((e.code() == code), e.what());
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  tk::weight_ref i32{q.data(), dtype::i32, 4, 4};  // (i8 / f8_e4m3 go to the quantized kernels)
  expect([&] { tk::matmul(x.data(), 1, i32, y.data()); }, troupe::errc::unsupported, "dtype I32");
  tk::weight_ref ok{x.data(), dtype::f32, 4, 4};
  expect([&] { tk::matmul(x.data(), -1, ok, y.data()); }, troupe::errc::invalid_argument, "n=-1");
  tk::weight_ref neg{x.data(), dtype::f32, -4, 4};
  expect([&] { tk::matmul(x.data(), 1, neg, y.data()); }, troupe::errc::invalid_argument, "rows=-4");
  expect([&] { tk::matmul(nullptr, 1, ok, y.data()); }, troupe::errc::invalid_argument, "null");
  expect([&] { tk::matmul(x.data(), 1, ok, nullptr); }, troupe::errc::invalid_argument, "null");
  tk::weight_ref no_data{nullptr, dtype::bf16, 4, 4};
  expect([&] { tk::matmul(x.data(), 1, no_data, y.data()); }, troupe::errc::invalid_argument, "null");
  // Products of one x: one width, a bounded count, and each product checked as its own call is.
  tk::weight_ref narrow{x.data(), dtype::f32, 4, 2};
  const tk::matmul_out mixed[] = {{ok, y.data()}, {narrow, y.data()}};
  expect([&] { tk::matmul(x.data(), 1, mixed, tk::compute_dtype::f32); }, troupe::errc::invalid_argument,
         "got 4 and 2 columns");
  std::vector<tk::matmul_out> lots(tk::max_matmul_outs + 1, tk::matmul_out{ok, y.data()});
  expect([&] { tk::matmul(x.data(), 1, lots, tk::compute_dtype::bf16); }, troupe::errc::invalid_argument,
         "9 products in one call (at most 8)");
  const tk::matmul_out bad_second[] = {{ok, y.data()}, {i32, y.data()}};
  if (std::string(tk::matmul_isa()) != "invalid")  // else the first product's call is refused first
    expect([&] { tk::matmul(x.data(), 1, bad_second, tk::compute_dtype::f32); }, troupe::errc::unsupported, "dtype I32");
}

BOOST_AUTO_TEST_SUITE_END()
