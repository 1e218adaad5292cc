// kernels::matmul on quantized weights (INT8 per-group scales, FP8 e4m3 block scales): every
// back-end this CPU runs gives the float reference's bits on value * scale (matmul_quant.hpp), all
// within float32 noise of the float64 product with the dequantised weights, bitwise batch
// invariance (a row's result never depends on n, its neighbours or the thread count), and the
// errors for malformed weights. 4-bit u4 weights give the bits of the INT8 weight q - zero.
#define BOOST_TEST_MODULE kernels_quant
#include <omp.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_quant.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

namespace tk = troupe::kernels;
namespace cpu = troupe::kernels::cpu;
using troupe::dtype;

namespace {

// Random codes and positive scales; the extreme INT8 codes among them.
struct qweight {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  tk::weight_ref ref;

  qweight(dtype t, int64_t rows, int64_t cols, int32_t group_rows, int32_t group_cols, uint32_t seed) {
    std::mt19937 rng(seed);
    codes.resize(static_cast<size_t>(rows * cols));
    for (auto& c : codes) {
      c = static_cast<uint8_t>(rng());
      if (t == dtype::f8_e4m3 && (c & 0x7f) == 0x7f) c ^= 1;  // no NaN codes
    }
    if (t == dtype::i8 && codes.size() > 4) codes[0] = 0x80, codes[1] = 0x7f, codes[2] = 0x81;
    ref = {nullptr, t, rows, cols};
    ref.group_rows = group_rows;
    ref.group_cols = group_cols;
    std::uniform_real_distribution<float> s(0.5f, 2.0f);
    scales.resize(static_cast<size_t>(ref.scale_rows() * ref.scale_cols()));
    for (auto& v : scales) v = s(rng) * (t == dtype::i8 ? 1.0f / 127 : 1.0f / 448);
    ref.data = codes.data();
    ref.scales = scales.data();
  }
};

std::vector<float> random_x(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = d(rng);
  // One row with a wide dynamic range (2^-20 .. 2^19 times a normal value).
  if (n > 1)
    for (int64_t k = 0; k < cols; ++k) x[static_cast<size_t>(cols + k)] *= std::ldexp(1.0f, static_cast<int>(k % 40) - 20);
  return x;
}

// One back-end over every unit of rows, single-threaded, as matmul() hands them out.
std::vector<float> run(const cpu::matmul_backend& b, const float* x, int64_t n, const tk::weight_ref& w) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), -7.f);
  std::vector<float> scratch(b.scratch_floats(n, w) + 16);
  float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  const int64_t unit = b.unit_rows(n, w);
  for (int64_t j0 = 0; j0 < w.rows; j0 += unit) b.run(x, n, w, j0, std::min(j0 + unit, w.rows), y.data(), aligned);
  return y;
}

// |y - ref| <= tol * (largest |ref| of that row) for every element.
void check_close(const std::vector<float>& y, const std::vector<float>& ref, int64_t n, int64_t rows, double tol,
                 const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    double scale = 1e-30;
    for (int64_t j = 0; j < rows; ++j) scale = std::max(scale, std::fabs(static_cast<double>(ref[i * rows + j])));
    for (int64_t j = 0; j < rows; ++j) {
      const double d = std::fabs(static_cast<double>(y[i * rows + j]) - ref[i * rows + j]);
      if (!(d <= tol * scale)) {
        BOOST_ERROR(what << ": y[" << i << "][" << j << "] = " << y[i * rows + j] << ", reference " << ref[i * rows + j]
                         << " (row scale " << scale << ")");
        return;
      }
    }
  }
}

// The dequantised arithmetic's definition: the portable float back-end on float32 value * scale.
std::vector<float> dequantised_reference(const float* x, int64_t n, const tk::weight_ref& w) {
  std::vector<float> wf(static_cast<size_t>(w.rows * w.cols));
  for (int64_t j = 0; j < w.rows; ++j)
    for (int64_t k = 0; k < w.cols; ++k) wf[static_cast<size_t>(j * w.cols + k)] = tk::dequantized_at(w, j, k);
  std::vector<float> y(static_cast<size_t>(n * w.rows));
  const tk::weight_ref wr{wf.data(), dtype::f32, w.rows, w.cols};
  const auto& generic = cpu::matmul_backend_generic();  // the 16-lane dot product in scalar C++
  std::vector<float> scratch(generic.scratch_floats(n, wr));
  generic.run(x, n, wr, 0, w.rows, y.data(), scratch.data());
  return y;
}

struct shape {
  int64_t rows, cols;
  int32_t group_rows, group_cols;
};

const shape kInt8Shapes[] = {{1, 1, 1, 128},     {5, 31, 1, 32},      {17, 32, 1, 32},    {70, 160, 1, 128},
                             {9, 160, 1, 160},   {130, 1024, 1, 64},  {33, 3072, 1, 128}, {40, 2000, 1, 2000},
                             {24, 700, 1, 256},  {66, 1536, 1, 1024}, {3, 96, 1, 32}};
const shape kFp8Shapes[] = {{1, 1, 128, 128},    {5, 31, 128, 128},   {130, 160, 128, 128}, {300, 1024, 128, 128},
                            {70, 257, 128, 128}, {17, 48, 16, 16},    {40, 100, 1, 100},
                            {20, 100, 16, 48}};  // a group that is no power of two

// Every back-end on INT8 or FP8 weights: the float reference's bits on value * scale, within
// float32 noise of the float64 product, each row alone as in its batch; matmul() the same.
void check(dtype t, const shape& s) {
  const qweight w(t, s.rows, s.cols, s.group_rows, s.group_cols, static_cast<uint32_t>(s.rows * 5 + s.cols));
  const std::string what = std::string(troupe::to_string(t)) + " [" + std::to_string(s.rows) + "x" +
                           std::to_string(s.cols) + "] groups " + std::to_string(s.group_rows) + "x" +
                           std::to_string(s.group_cols);
  for (int64_t n : {1, 2, 3, 4, 7, 15, 16, 40, 70}) {  // decode tiles, passes, packed panels, two blocks
    const auto x = random_x(n, s.cols, static_cast<uint32_t>(n + 11));
    const auto want = dequantised_reference(x.data(), n, w.ref);
    std::vector<float> ref(static_cast<size_t>(n * s.rows));
    cpu::matmul_dequant_reference(x.data(), n, w.ref, ref.data());
    check_close(want, ref, n, s.rows, 1e-5, what + " n=" + std::to_string(n) + " vs float64");
    for (const auto* b : cpu::runnable_matmul_backends()) {
      const auto y = run(*b, x.data(), n, w.ref);
      BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0, what << " n=" << n << ": " << b->name);
      for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 3)) {
        const auto alone = run(*b, x.data() + i * s.cols, 1, w.ref);
        BOOST_TEST(std::memcmp(alone.data(), y.data() + i * s.rows, alone.size() * sizeof(float)) == 0,
                   what << " n=" << n << " row " << i << ": " << b->name << " depends on the batch");
      }
    }
    std::vector<float> y(static_cast<size_t>(n * s.rows));
    tk::matmul(x.data(), n, w.ref, y.data());
    BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0, what << " n=" << n << ": matmul()");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(int8_is_the_float_kernel_on_code_times_scale_on_every_back_end) {
  for (const auto& s : kInt8Shapes) check(dtype::i8, s);
}

BOOST_AUTO_TEST_CASE(fp8_is_the_float_kernel_on_value_times_scale_on_every_back_end) {
  for (const auto& s : kFp8Shapes) check(dtype::f8_e4m3, s);
}

namespace {

// A u4 weight (kernels.hpp's layout, packed here from the documented rule) and the INT8 weight
// with its values: codes q - zero, the same scales.
struct u4_and_int8 {
  std::vector<uint8_t> packed, zeros;
  std::vector<int8_t> codes;
  std::vector<float> scales;
  tk::weight_ref u4, i8;

  u4_and_int8(int64_t rows, int64_t cols, int32_t group_cols, uint32_t seed) {
    std::mt19937 rng(seed);
    u4 = {nullptr, dtype::u4, rows, cols};
    u4.group_rows = 1;
    u4.group_cols = group_cols;
    const int64_t groups = u4.scale_cols();
    zeros.resize(static_cast<size_t>(rows * groups));
    for (auto& z : zeros) z = static_cast<uint8_t>(rng() % 17);  // GPTQ v1's zeros reach 16
    if (!zeros.empty()) zeros[0] = 0, zeros.back() = 16;
    std::uniform_real_distribution<float> s(0.5f, 2.0f);
    scales.resize(zeros.size());
    for (auto& v : scales) v = s(rng) / 8;
    packed.assign(static_cast<size_t>(rows * cols / 2), 0);
    codes.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int q = static_cast<int>(rng() % 16);
        // The documented layout: even columns 2i at bits 4i of the block's word, odd 2i + 1 at 32 + 4i.
        const int bit = c % 2 == 0 ? 4 * static_cast<int>(c % 16 / 2) : 32 + 4 * static_cast<int>(c % 16 / 2);
        uint8_t& b = packed[static_cast<size_t>(r * (cols / 2) + c / 16 * 8 + bit / 8)];
        b = static_cast<uint8_t>(b | (bit % 8 == 0 ? q : q << 4));
        codes[static_cast<size_t>(r * cols + c)] = static_cast<int8_t>(q - zeros[static_cast<size_t>(r * groups + c / group_cols)]);
      }
    u4.data = packed.data();
    u4.scales = scales.data();
    u4.zeros = zeros.data();
    i8 = u4;
    i8.type = dtype::i8;
    i8.data = codes.data();
    i8.zeros = nullptr;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(u4_gives_the_int8_weights_bits_on_every_back_end) {
  const shape shapes[] = {{5, 16, 1, 16},     {17, 32, 1, 32},    {70, 160, 1, 128},  {9, 160, 1, 160},
                          {130, 1024, 1, 64}, {33, 3072, 1, 128}, {24, 704, 1, 256},  {66, 1536, 1, 1024},
                          {3, 96, 1, 32},     {300, 1024, 1, 128}};
  for (const auto& s : shapes) {
    const u4_and_int8 w(s.rows, s.cols, s.group_cols, static_cast<uint32_t>(s.rows * 7 + s.cols));
    const std::string what = "u4 [" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "] group " +
                             std::to_string(s.group_cols);
    BOOST_TEST(w.u4.bytes() * 2 == w.i8.bytes());
    for (int64_t r = 0; r < s.rows; r += 7)
      for (int64_t c = 0; c < s.cols; c += 5)
        BOOST_TEST(tk::dequantized_at(w.u4, r, c) == tk::dequantized_at(w.i8, r, c), what << " (" << r << ", " << c << ")");
    for (int64_t n : {1, 2, 3, 4, 7, 15, 16, 40, 70}) {
      const auto x = random_x(n, s.cols, static_cast<uint32_t>(n + 3));
      const auto want = run(cpu::matmul_backend_generic(), x.data(), n, w.i8);
      for (const auto* b : cpu::runnable_matmul_backends()) {
        const auto y = run(*b, x.data(), n, w.u4);
        BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0, what << " n=" << n << ": " << b->name);
      }
      std::vector<float> y(static_cast<size_t>(n * s.rows));
      tk::matmul(x.data(), n, w.u4, y.data());
      BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0, what << " n=" << n << ": matmul()");
    }
  }
}

BOOST_AUTO_TEST_CASE(results_do_not_depend_on_the_thread_count) {
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    const qweight w(t, 700, 1024, t == dtype::i8 ? 1 : 128, 128, 3);
    for (int64_t n : {1, 40}) {
      const auto x = random_x(n, 1024, 5);
      std::vector<float> one(static_cast<size_t>(n * 700)), two(one.size());
      const int before = omp_get_max_threads();
      omp_set_num_threads(1);
      tk::matmul(x.data(), n, w.ref, one.data());
      omp_set_num_threads(std::max(2, before));
      tk::matmul(x.data(), n, w.ref, two.data());
      omp_set_num_threads(before);
      BOOST_TEST(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0, troupe::to_string(t) << " n=" << n);
    }
  }
}

BOOST_AUTO_TEST_CASE(zero_and_non_finite_rows) {
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    const qweight w(t, 20, 64, t == dtype::i8 ? 1 : 128, 128, 9);
    std::vector<float> x(3 * 64, 0.0f), y(3 * 20, -1.0f);
    for (int k = 0; k < 64; ++k) x[64 + k] = 1.0f;
    x[128 + 5] = INFINITY;
    tk::matmul(x.data(), 3, w.ref, y.data());
    for (int j = 0; j < 20; ++j) {
      BOOST_TEST(y[j] == 0.0f);
      BOOST_TEST(std::isfinite(y[20 + j]));
      BOOST_TEST(!std::isfinite(y[40 + j]), troupe::to_string(t) << " column " << j << ": " << y[40 + j]);
    }
  }
}

BOOST_AUTO_TEST_CASE(malformed_quantized_weights_are_refused) {
  std::vector<uint8_t> codes(64 * 64, 1);
  std::vector<float> scales(64 * 64, 1.0f), x(64, 1.0f), y(64);
  auto expect = [&](tk::weight_ref w, const std::string& needle) {
    try {
      tk::matmul(x.data(), 1, w, y.data());
      BOOST_ERROR("expected an error containing '" << needle << "'");
    } catch (const troupe::error& e) {
      BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(troupe::errc::invalid_argument));
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  tk::weight_ref w{codes.data(), dtype::i8, 64, 64};
  expect(w, "no scales");
  w.scales = scales.data();
  expect(w, "group shape 0x0 is not positive");
  w.group_rows = 2, w.group_cols = 32;
  expect(w, "INT8 scales must be per output row (group_rows 1), got 2");
  w.group_rows = 1, w.group_cols = 48;
  expect(w, "INT8 group_cols 48 must be a power of two in [32, 4096]");
  w.type = dtype::f8_e4m3, w.group_rows = 128, w.group_cols = 40;
  expect(w, "FP8 group_cols 40 must be a multiple of 16");
  w.type = dtype::u4, w.group_rows = 1, w.group_cols = 64;
  expect(w, "no zeros (a U4 weight needs one zero point per scale)");
  w.zeros = codes.data();
  w.cols = 40;
  expect(w, "U4 cols must be a multiple of 16");
  w.cols = 64, w.group_cols = 48;
  expect(w, "U4 group_cols 48 must be a power of two in [32, 4096]");
  try {
    (void)tk::dequantized_at(tk::weight_ref{x.data(), dtype::f32, 1, 64}, 0, 0);
    BOOST_ERROR("dequantized_at accepted a float weight");
  } catch (const troupe::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(troupe::errc::invalid_argument));
    BOOST_TEST(std::string(e.what()).find("not a quantized weight") != std::string::npos, e.what());
  }
}
