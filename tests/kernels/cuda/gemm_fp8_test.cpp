// The CUDA FP8 block GEMM (kernels/cuda/gemm.hpp) against its host reproduction
// (kernels/cuda/fp8_reference.hpp) and against the CPU path kernels::matmul.
// Cases that need a device exit with 77 when there is none (or it predates FP8 tensor cores):
// ctest reports them as skipped (SKIP_RETURN_CODE), never as passed.
#define BOOST_TEST_MODULE kernels_cuda_gemm_fp8
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/fp8_reference.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
// For BOOST_TEST's messages on fp8_path comparisons (found by ADL).
inline std::ostream& operator<<(std::ostream& o, fp8_path p) { return o << fp8_path_name(p); }
}  // namespace troupe::kernels::cuda

namespace cu = troupe::kernels::cuda;
namespace ref = troupe::kernels::cuda::reference;
using troupe::dtype;

namespace {

constexpr int kSkip = 77;

// Exits the process with 77 (ctest: skipped) unless a device with FP8 tensor cores is present.
void require_fp8_device() {
  if (cu::device_count() == 0) {
    std::printf("SKIP: no CUDA device (this case needs one)\n");
    std::fflush(stdout);
    std::exit(kSkip);
  }
  const std::string d = cu::describe_device(0);
  int sm = 0;
  if (const auto p = d.find("(sm_"); p != std::string::npos) sm = std::atoi(d.c_str() + p + 4);
  if (sm < 89) {
    std::printf("SKIP: %s has no FP8 tensor cores (needs sm_89+)\n", d.c_str());
    std::fflush(stdout);
    std::exit(kSkip);
  }
  BOOST_TEST_MESSAGE("device: " << d);
}

struct shape {
  int64_t rows, cols;
};
// Block-aligned; a row tail inside a 128-row block (144 = 128 + 16); a 16-column tail (1040); odd
// tails on both (272 x 2064); a Qwen3 kv projection (1024 x 4096: 32 column blocks, 8 per k warp).
const shape kShapes[] = {{128, 128}, {144, 1040}, {272, 2064}, {1024, 4096}};
const int64_t kBatches[] = {1, 7, 128, 300};

struct fp8_weight {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  troupe::kernels::weight_ref ref() const {
    troupe::kernels::weight_ref w;
    w.data = codes.data();
    w.type = dtype::f8_e4m3;
    w.rows = rows;
    w.cols = cols;
    w.scales = scales.data();
    w.group_rows = 128;
    w.group_cols = 128;
    return w;
  }
};

// Weights shaped like a checkpoint's: codes of N(0, 1) * 110 (|code| mostly well inside 448) and
// per-block scales spread over two binades.
fp8_weight random_weight(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 110.0f);
  std::uniform_real_distribution<float> uni(0.5f, 2.0f);
  fp8_weight w{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols)), {}};
  for (auto& c : w.codes) c = troupe::f32_to_f8e4m3(normal(rng));
  w.scales.resize(static_cast<size_t>(((rows + 127) / 128) * ref::col_blocks(cols)));
  for (auto& s : w.scales) s = uni(rng) * 1e-4f;
  return w;
}

// Activations with outlier columns, as LLM hidden states have.
std::vector<float> random_activations(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) x[i * cols + c] = normal(rng) * (c % 97 == 5 ? 30.0f : 1.0f);
  return x;
}

// Data whose every intermediate is exact in fp32 and in the tensor cores' narrower accumulator:
// weight codes in {-1, 0, 1}, power-of-two scales; each (token, 128-column group) of x holds one
// +-448 * 2^e and otherwise {-2..2} * 2^e, so its scale is exactly 2^e and its codes are the
// integers themselves. Block sums stay below 2^13 and the whole result is exact in float32.
void exact_data(int64_t n, int64_t rows, int64_t cols, fp8_weight& w, std::vector<float>& x, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tri(-1, 1), five(-2, 2);
  w = fp8_weight{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols)), {}};
  for (auto& c : w.codes) c = troupe::f32_to_f8e4m3(static_cast<float>(tri(rng)));
  const int64_t kbs = ref::col_blocks(cols);
  w.scales.resize(static_cast<size_t>(((rows + 127) / 128) * kbs));
  for (size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = std::ldexp(1.0f, -static_cast<int>(i % 4));
  x.assign(static_cast<size_t>(n * cols), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t kb = 0; kb < kbs; ++kb) {
      const int64_t c0 = kb * 128, len = std::min<int64_t>(128, cols - c0);
      const int e = static_cast<int>((i + kb) % 3) - 1;
      for (int64_t c = 0; c < len; ++c) x[i * cols + c0 + c] = std::ldexp(static_cast<float>(five(rng)), e);
      const int64_t peak = (i * 7 + kb * 13) % len;
      x[i * cols + c0 + peak] = std::ldexp((i + kb) % 2 ? 448.0f : -448.0f, e);
    }
}

struct device_run {
  cu::fp8_path path = cu::fp8_path::automatic;  // the path that ran
  std::vector<float> y;           // [n, rows]
  std::vector<uint8_t> codes;     // the workspace's activation codes [n, padded cols]
  std::vector<float> act_scales;  // [n, column blocks]
};

device_run run_on_device(const std::vector<float>& x, int64_t n, const fp8_weight& w,
                         cu::fp8_path path = cu::fp8_path::automatic) {
  cu::device_buffer dx(x.size() * sizeof(float)), dw(w.codes.size()), ds(w.scales.size() * sizeof(float)),
      dy(static_cast<size_t>(n * w.rows) * sizeof(float)), ws(cu::fp8_workspace_bytes(n, w.cols));
  dx.upload(x.data(), dx.size_bytes());
  dw.upload(w.codes.data(), dw.size_bytes());
  ds.upload(w.scales.data(), ds.size_bytes());
  const cu::fp8_path ran = cu::matmul_fp8_block(dx.data(), cu::act_type::f32, n, dw.as<uint8_t>(), ds.as<float>(),
                                                w.rows, w.cols, dy.as<float>(), ws.data(), nullptr, path);
  cu::synchronize();
  device_run r;
  r.path = ran;
  r.y.resize(static_cast<size_t>(n * w.rows));
  dy.download(r.y.data(), dy.size_bytes());
  const int64_t kbs = ref::col_blocks(w.cols);
  std::vector<uint8_t> all(ws.size_bytes());
  ws.download(all.data(), all.size());
  r.codes.assign(all.begin(), all.begin() + n * kbs * 128);
  r.act_scales.resize(static_cast<size_t>(n * kbs));
  std::memcpy(r.act_scales.data(), all.data() + cu::fp8_scales_offset(n, w.cols), r.act_scales.size() * sizeof(float));
  return r;
}

// Worst-case error of the activation rounding alone, per output: |x - x^| <= 2^-4 |x| (3 mantissa
// bits, round to nearest) + sa * 2^-10 (half the smallest subnormal step), times |w^|.
std::vector<double> activation_rounding_bound(const std::vector<float>& x, int64_t n, const fp8_weight& w,
                                              const ref::quantized_activations& q) {
  std::vector<double> b(static_cast<size_t>(n * w.rows));
  const int64_t kbs = q.blocks;
#pragma omp parallel for
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const double wv = std::fabs(static_cast<double>(troupe::f8e4m3_to_f32(w.codes[r * w.cols + c])) *
                                    w.scales[(r / 128) * kbs + c / 128]);
        s += (std::ldexp(std::fabs(static_cast<double>(x[i * w.cols + c])), -4) +
              std::ldexp(static_cast<double>(q.scales[i * kbs + c / 128]), -10)) * wv;
      }
      b[i * w.rows + r] = s;
    }
  return b;
}

double rms_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0, s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    s += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / s);
}

// The kernel's own error: the tensor cores sum each 32-deep MMA and chain four per 128-column
// block in an accumulator that keeps at least ~13 mantissa bits on Hopper (DeepSeek-V3 report
// 3.3.2; SageAttention2 measured FP22 for this very instruction), i.e. each of <= 5 roundings per
// block costs <= 2^-13 of the block's sum of |products|; the fp32 block sums add 2^-24 each.
// 2^-10 of the full sum of |products| covers that with room (>= 1.6x over the worst case), yet is
// far below what a wrong fragment, tile, tail or scale gives (>= one block's worth of output).
constexpr double kTensorCoreRel = 1.0 / 1024;
// Measured on the host (host_reference_tracks_cpu_matmul): the activation rounding moves the output
// by 0.009-0.011 of its RMS for these data; 0.025 is the bound checked.
constexpr double kActivationRmsRel = 0.025;

// The paths a case runs for batch size n: the automatic choice, then each own kernel it did not
// pick (decode is meant for small n; running it at n = 300 too covers its multi-tile grid).
std::vector<cu::fp8_path> paths_for(int64_t n) {
  (void)n;
  return {cu::fp8_path::automatic, cu::fp8_path::decode, cu::fp8_path::mma};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_gemm_fp8)

// --- host-only cases (run everywhere) ---------------------------------------------------------

BOOST_AUTO_TEST_CASE(host_reference_tracks_cpu_matmul) {
  // The host reproduction (with activation rounding) vs kernels::matmul (float32 activations):
  // the looser bound the device results are held to below, checked here without a device.
  for (const shape s : kShapes) {
    const int64_t n = 7;
    const fp8_weight w = random_weight(s.rows, s.cols, 11);
    const std::vector<float> x = random_activations(n, s.cols, 12);
    const ref::quantized_activations q = ref::quantize(x.data(), n, s.cols);
    std::vector<double> y_ref, l1;
    ref::matmul(q, w.codes.data(), w.scales.data(), s.rows, y_ref, l1);
    std::vector<float> y_cpu(static_cast<size_t>(n * s.rows));
    troupe::kernels::matmul(x.data(), n, w.ref(), y_cpu.data());
    const std::vector<double> bound = activation_rounding_bound(x, n, w, q);
    std::vector<float> y_ref_f(y_ref.begin(), y_ref.end());
    double worst = 0.0;
    for (size_t i = 0; i < y_cpu.size(); ++i) {
      const double err = std::fabs(y_ref[i] - y_cpu[i]);
      worst = std::max(worst, err / bound[i]);
      BOOST_TEST(err <= bound[i], "output " << i << ": " << y_ref[i] << " vs cpu " << y_cpu[i]);
    }
    const double rel = rms_rel(y_ref_f, y_cpu);
    BOOST_TEST_MESSAGE(s.rows << "x" << s.cols << ": worst |err| / bound " << worst << ", rms rel " << rel);
    BOOST_TEST(rel <= kActivationRmsRel);
    BOOST_TEST(rel > 1e-3);  // the rounding is really there
  }
}

BOOST_AUTO_TEST_CASE(host_quantization_scales_and_codes) {
  std::vector<float> x(144, 0.0f);
  x[3] = -7.0f;   // group 0: amax 7 -> scale 7/448, code of -7 is -448
  x[10] = 3.5f;   // 3.5 / (7/448) = 224 exactly
  x[130] = 0.5f;  // group 1 (16 columns): amax 0.5
  std::vector<uint8_t> codes(256, 0xaa);
  std::vector<float> scales(2);
  ref::quantize_row(x.data(), 144, codes.data(), scales.data());
  BOOST_TEST(scales[0] == 7.0f / 448.0f);
  BOOST_TEST(codes[3] == 0xfe);
  BOOST_TEST(troupe::f8e4m3_to_f32(codes[10]) == 224.0f);
  BOOST_TEST(codes[0] == 0);
  BOOST_TEST(codes[130] == 0x7e);
  for (int c = 144; c < 256; ++c) BOOST_TEST(codes[c] == 0, "padding column " << c);
  std::vector<float> zero(128, 0.0f);
  ref::quantize_row(zero.data(), 128, codes.data(), scales.data());
  BOOST_TEST(scales[0] == 0.0f);
  BOOST_TEST(codes[5] == 0);
}

BOOST_AUTO_TEST_CASE(unsupported_shapes_are_refused_before_touching_the_device) {
  alignas(16) static uint8_t dummy[64];
  auto call = [&](int64_t n, int64_t rows, int64_t cols) {
    cu::matmul_fp8_block(dummy, cu::act_type::f32, n, dummy, reinterpret_cast<float*>(dummy), rows, cols,
                         reinterpret_cast<float*>(dummy), dummy, nullptr);
  };
  auto is_invalid = [](const troupe::error& e) { return e.code() == troupe::errc::invalid_argument; };
  BOOST_CHECK_EXCEPTION(call(1, 24, 128), troupe::error, is_invalid);   // rows not a multiple of 16
  BOOST_CHECK_EXCEPTION(call(1, 128, 100), troupe::error, is_invalid);  // cols not a multiple of 16
  BOOST_CHECK_EXCEPTION(call(0, 128, 128), troupe::error, is_invalid);  // no tokens
  BOOST_CHECK_EXCEPTION(call(1, 0, 128), troupe::error, is_invalid);
}

// --- device cases (skipped without an sm_89+ device) ------------------------------------------

BOOST_AUTO_TEST_CASE(device_activation_quantization_is_bitwise_the_host_one) {
  require_fp8_device();
  for (const shape s : kShapes)
    for (const int64_t n : {int64_t{7}, int64_t{300}}) {
      const fp8_weight w = random_weight(s.rows, s.cols, 1);
      std::vector<float> x = random_activations(n, s.cols, 2);
      x[3] = 0.0f;  // include tiny and subnormal-range values
      for (int64_t c = 0; c < std::min<int64_t>(s.cols, 64); ++c) x[s.cols + c] = std::ldexp(1.0f, -20 - int(c % 10));
      const device_run d = run_on_device(x, n, w);
      const ref::quantized_activations q = ref::quantize(x.data(), n, s.cols);
      size_t bad = 0;
      for (size_t i = 0; i < q.codes.size(); ++i) bad += q.codes[i] != d.codes[i];
      BOOST_TEST(bad == 0u, s.rows << "x" << s.cols << " n " << n << ": " << bad << " codes differ");
      BOOST_TEST(q.scales == d.act_scales, "activation scales differ");
    }
}

BOOST_AUTO_TEST_CASE(device_exact_data_gives_exact_results) {
  require_fp8_device();
  for (const shape s : kShapes)
    for (const int64_t n : kBatches) {
      fp8_weight w;
      std::vector<float> x;
      exact_data(n, s.rows, s.cols, w, x, static_cast<uint32_t>(n * 31 + s.cols));
      std::vector<double> y_ref, l1;
      ref::matmul(ref::quantize(x.data(), n, s.cols), w.codes.data(), w.scales.data(), s.rows, y_ref, l1);
      for (const cu::fp8_path path : paths_for(n)) {
        const device_run d = run_on_device(x, n, w, path);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < y_ref.size(); ++i)
          if (static_cast<double>(d.y[i]) != y_ref[i] && bad++ == 0) first = i;
        BOOST_TEST(bad == 0u, s.rows << "x" << s.cols << " n " << n << " path " << cu::fp8_path_name(d.path) << ": "
                                     << bad << " outputs differ; first (token " << first / s.rows << ", row "
                                     << first % s.rows << "): " << d.y[first] << " vs " << y_ref[first]);
      }
    }
}

BOOST_AUTO_TEST_CASE(device_random_data_within_bounds) {
  require_fp8_device();
  for (const shape s : kShapes)
    for (const int64_t n : kBatches) {
      const fp8_weight w = random_weight(s.rows, s.cols, static_cast<uint32_t>(s.rows + s.cols));
      const std::vector<float> x = random_activations(n, s.cols, static_cast<uint32_t>(n));
      const ref::quantized_activations q = ref::quantize(x.data(), n, s.cols);
      std::vector<double> y_ref, l1;
      ref::matmul(q, w.codes.data(), w.scales.data(), s.rows, y_ref, l1);
      std::vector<float> y_cpu(static_cast<size_t>(n * s.rows));
      troupe::kernels::matmul(x.data(), n, w.ref(), y_cpu.data());
      const std::vector<double> bound = activation_rounding_bound(x, n, w, q);
      for (const cu::fp8_path path : paths_for(n)) {
        const device_run d = run_on_device(x, n, w, path);
        // Tight: the host reproduction, whose only difference is the summation.
        double worst = 0.0;
        size_t bad = 0;
        for (size_t i = 0; i < y_ref.size(); ++i) {
          const double err = std::fabs(d.y[i] - y_ref[i]);
          worst = std::max(worst, l1[i] > 0 ? err / l1[i] : err);
          bad += !(err <= kTensorCoreRel * l1[i]);  // also counts NaN
        }
        BOOST_TEST(bad == 0u, s.rows << "x" << s.cols << " n " << n << " path " << cu::fp8_path_name(d.path) << ": "
                                     << bad << " outputs off by more than 2^-10 of their sum of |products|; worst ratio "
                                     << worst);
        // Loose: the CPU path on float32 activations, off by the activation rounding.
        size_t bad_cpu = 0;
        for (size_t i = 0; i < y_cpu.size(); ++i)
          bad_cpu += !(std::fabs(d.y[i] - y_cpu[i]) <= bound[i] + kTensorCoreRel * l1[i] + 1e-5 * std::fabs(y_cpu[i]));
        const double rel = rms_rel(d.y, y_cpu);
        BOOST_TEST(bad_cpu == 0u, bad_cpu << " outputs beyond the activation-rounding bound of kernels::matmul");
        BOOST_TEST(rel <= kActivationRmsRel);
        BOOST_TEST_MESSAGE(s.rows << "x" << s.cols << " n " << n << " " << cu::fp8_path_name(d.path)
                                  << ": worst |err| / sum|products| " << worst << " (bound " << kTensorCoreRel
                                  << "), rms rel vs kernels::matmul " << rel);
      }
    }
}

BOOST_AUTO_TEST_CASE(device_results_do_not_depend_on_the_batch) {
  require_fp8_device();
  // The own kernels only (decode and mma; cuBLASLt may change its algorithm with n, see
  // docs/cuda.md): tokens computed with n = 1, 7, 16 (decode, automatic), 1, 7 (mma tiles 16 x 8),
  // 30 (mma tiles 32 x 32) are bitwise those of n = 300 through the mma kernel (64 x 16 tiles) and
  // through the decode kernel (16 x 16 tiles).
  const shape s{1024, 4096};
  const fp8_weight w = random_weight(s.rows, s.cols, 5);
  const std::vector<float> x = random_activations(300, s.cols, 6);
  const device_run all = run_on_device(x, 300, w, cu::fp8_path::mma);
  BOOST_TEST(all.path == cu::fp8_path::mma);
  const device_run all_decode = run_on_device(x, 300, w, cu::fp8_path::decode);
  BOOST_TEST(all_decode.path == cu::fp8_path::decode);
  BOOST_TEST(std::memcmp(all.y.data(), all_decode.y.data(), all.y.size() * 4) == 0, "decode and mma differ at n = 300");
  const std::pair<int64_t, cu::fp8_path> runs[] = {
      {1, cu::fp8_path::automatic}, {7, cu::fp8_path::automatic}, {16, cu::fp8_path::automatic},
      {1, cu::fp8_path::mma},       {7, cu::fp8_path::mma},       {30, cu::fp8_path::automatic}};
  for (const auto& [n, path] : runs) {
    for (const int64_t start : {int64_t{0}, int64_t{123}, int64_t{300} - n}) {
      const std::vector<float> part(x.begin() + start * s.cols, x.begin() + (start + n) * s.cols);
      const device_run d = run_on_device(part, n, w, path);
      BOOST_TEST(d.path != cu::fp8_path::cublaslt);
      size_t bad = 0;
      for (int64_t i = 0; i < n * s.rows; ++i) bad += std::memcmp(&d.y[i], &all.y[start * s.rows + i], 4) != 0;
      BOOST_TEST(bad == 0u, "n " << n << " (" << cu::fp8_path_name(d.path) << ") from token " << start << ": " << bad
                                 << " outputs differ from n = 300");
    }
  }
}

BOOST_AUTO_TEST_CASE(device_cublaslt_path_within_bounds) {
  require_fp8_device();
  // The prefill path: cuBLASLt's block-scaled FP8 GEMM on the same quantized activations, held to
  // the same bound against the host reproduction. n = 130: the last 2 tokens go through the decode
  // kernel (cuBLASLt gets a multiple of 4). If cuBLASLt refuses, the own kernel runs: a warning.
  const shape shapes[] = {{256, 1024}, {512, 2048}, {1024, 4096}};
  for (const shape s : shapes)
    for (const int64_t n : {int64_t{128}, int64_t{130}, int64_t{300}, int64_t{2048}}) {
      const fp8_weight w = random_weight(s.rows, s.cols, static_cast<uint32_t>(s.rows + 3 * s.cols));
      const std::vector<float> x = random_activations(n, s.cols, static_cast<uint32_t>(n + 17));
      const device_run d = run_on_device(x, n, w);
      BOOST_WARN_MESSAGE(d.path == cu::fp8_path::cublaslt, s.rows << "x" << s.cols << " n " << n << ": ran "
                                                                 << cu::fp8_path_name(d.path) << ", not cublaslt");
      const ref::quantized_activations q = ref::quantize(x.data(), n, s.cols);
      std::vector<double> y_ref, l1;
      ref::matmul(q, w.codes.data(), w.scales.data(), s.rows, y_ref, l1);
      double worst = 0.0;
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < y_ref.size(); ++i) {
        const double err = std::fabs(d.y[i] - y_ref[i]);
        worst = std::max(worst, l1[i] > 0 ? err / l1[i] : err);
        if (!(err <= kTensorCoreRel * l1[i]) && bad++ == 0) first = i;
      }
      BOOST_TEST(bad == 0u, s.rows << "x" << s.cols << " n " << n << " " << cu::fp8_path_name(d.path) << ": " << bad
                                   << " outputs off by more than 2^-10 of their sum of |products|; first (token "
                                   << first / s.rows << ", row " << first % s.rows << "): " << d.y[first] << " vs "
                                   << y_ref[first] << "; worst ratio " << worst);
      BOOST_TEST_MESSAGE(s.rows << "x" << s.cols << " n " << n << " " << cu::fp8_path_name(d.path)
                                << ": worst |err| / sum|products| " << worst << " (bound " << kTensorCoreRel << ")");
    }
}

BOOST_AUTO_TEST_CASE(device_bf16_activations_quantize_their_float_values) {
  require_fp8_device();
  const shape s{272, 2064};
  const int64_t n = 37;
  const fp8_weight w = random_weight(s.rows, s.cols, 7);
  std::vector<float> x = random_activations(n, s.cols, 8);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xb[i] = troupe::f32_to_bf16(x[i]);
    x[i] = troupe::bf16_to_f32(xb[i]);
  }
  const device_run f = run_on_device(x, n, w);
  cu::device_buffer dx(xb.size() * 2), dw(w.codes.size()), ds(w.scales.size() * 4), dy(f.y.size() * 4),
      ws(cu::fp8_workspace_bytes(n, s.cols));
  dx.upload(xb.data(), dx.size_bytes());
  dw.upload(w.codes.data(), dw.size_bytes());
  ds.upload(w.scales.data(), ds.size_bytes());
  cu::matmul_fp8_block(dx.data(), cu::act_type::bf16, n, dw.as<uint8_t>(), ds.as<float>(), s.rows, s.cols,
                       dy.as<float>(), ws.data(), nullptr);
  cu::synchronize();
  std::vector<float> y(f.y.size());
  dy.download(y.data(), dy.size_bytes());
  BOOST_TEST(std::memcmp(y.data(), f.y.data(), y.size() * 4) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
