// troupe-bench-matmul: kernels::matmul on the Qwen3-0.6B shapes (BF16 weights, or INT8 / FP8 with
// --dtype) for n = 1, 8, 32, 512, as time, weight GB/s (% of the read bandwidth measured in the same
// run) and GFLOP/s (% of the FMA peak measured in the same run), next to OpenBLAS sgemm/sgemv with
// the bf16 -> f32 widening of the weights counted (BF16 only). Weights cycle through copies filling
// >= 1 GiB, as the 28 layers of a real model do, so n = 1 reads them from DRAM and not from the
// 260 MB last-level cache.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine/machine_limits.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/aligned_vector.hpp"

#ifdef TROUPE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace tk = troupe::kernels;

namespace {

struct shape {
  const char* name;
  int64_t rows, cols;
};

// Qwen3-0.6B: hidden 1024, 16 q heads / 8 kv heads x 128, intermediate 3072, vocab 151936.
const shape qwen3_0_6b[] = {{"q_proj", 2048, 1024},   {"k_proj", 1024, 1024}, {"v_proj", 1024, 1024},
                            {"o_proj", 1024, 2048},   {"gate_proj", 3072, 1024}, {"up_proj", 3072, 1024},
                            {"down_proj", 1024, 3072}, {"lm_head", 151936, 1024}};
constexpr int num_layers = 28;

// A buffer of random bf16 weights (|w| < 0.25, no subnormals) that every shape views as copies.
struct arena {
  std::vector<uint16_t> data;
  explicit arena(size_t bytes) : data(bytes / 2) {
#pragma omp parallel
    {
      uint32_t s = 0x9e3779b9u * (omp_get_thread_num() + 1);
#pragma omp for schedule(static)
      for (size_t i = 0; i < data.size(); ++i) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        data[i] = static_cast<uint16_t>(0x3800 + (s & 0x07ff)) | static_cast<uint16_t>((s >> 16) & 0x8000);
      }
    }
  }
};

// Cache-line aligned, as the engine's activation rows are (runtime/core/aligned_vector.hpp).
troupe::aligned_vector<float> random_x(int64_t count) {
  troupe::aligned_vector<float> x(static_cast<size_t>(count));
  uint32_t s = 12345;
  for (auto& v : x) s = s * 1664525u + 1013904223u, v = static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  return x;
}

using troupe::bench::now_seconds;
using troupe::bench::timing;
timing bench_clock = timing::wall;

// Best time of one call over groups of consecutive calls on successive copies (f(copy) runs one).
template <class F>
double best_call_seconds(int64_t copies, double budget_s, F&& f) {
  const double t0 = now_seconds(bench_clock);
  f(0);  // warm-up, and calibration of the group size
  const double one = now_seconds(bench_clock) - t0;
  const int64_t group = std::clamp<int64_t>(static_cast<int64_t>(0.02 / std::max(one, 1e-7)), 1, copies);
  const int groups = std::clamp(static_cast<int>(budget_s / (one * group + 1e-9)), 3, 50);
  double best = one;
  int64_t next = 1;
  for (int g = 0; g < groups; ++g) {
    const double s = now_seconds(bench_clock);
    for (int64_t c = 0; c < group; ++c) f(next++ % copies);
    best = std::min(best, (now_seconds(bench_clock) - s) / group);
  }
  return best;
}

#ifdef TROUPE_HAVE_OPENBLAS
// The fair OpenBLAS baseline for a bf16 checkpoint: widen the weights to f32 (all threads), then sgemm.
void blas_matmul(const float* x, int64_t n, const uint16_t* w, int64_t rows, int64_t cols, float* wf, float* y) {
  const int64_t count = rows * cols;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) wf[i] = troupe::bf16_to_f32(w[i]);
  if (n == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols), 1.f, wf,
                static_cast<int>(cols), x, 1, 0.f, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(rows),
                static_cast<int>(cols), 1.f, x, static_cast<int>(cols), wf, static_cast<int>(cols), 0.f, y,
                static_cast<int>(rows));
}
// Does OpenBLAS give a row the same bits whatever the batch? Row i of an n = 512 sgemm against the
// same row alone (sgemv) and in an n = 8 sgemm, on f32 weights [rows x cols].
void check_blas_invariance(const float* w, int64_t rows, int64_t cols) {
  const int64_t n = 512;
  auto x = random_x(n * cols);
  std::vector<float> big(static_cast<size_t>(n * rows)), small(static_cast<size_t>(8 * rows)), one(rows);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.f, x.data(), cols, w, cols, 0.f, big.data(), rows);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 8, rows, cols, 1.f, x.data(), cols, w, cols, 0.f, small.data(), rows);
  int64_t differ_gemv = 0, differ_gemm8 = 0;
  for (int64_t i = 0; i < 8; ++i) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.f, w, cols, x.data() + i * cols, 1, 0.f, one.data(), 1);
    for (int64_t j = 0; j < rows; ++j) {
      differ_gemv += std::memcmp(&one[j], &big[i * rows + j], sizeof(float)) != 0;
      differ_gemm8 += std::memcmp(&small[i * rows + j], &big[i * rows + j], sizeof(float)) != 0;
    }
  }
  std::printf("OpenBLAS batch invariance [%lldx%lld], rows 0-7 of an n=512 sgemm: %lld of %lld outputs differ "
              "from sgemv (n=1), %lld from an n=8 sgemm\n",
              static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(differ_gemv),
              static_cast<long long>(8 * rows), static_cast<long long>(differ_gemm8));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernels::matmul on the Qwen3-0.6B shapes vs the machine's limits and OpenBLAS"};
  int threads = omp_get_max_threads();
  std::vector<int64_t> ns{1, 8, 32, 512};
  std::string only;
  bool blas = true;
  double budget_s = 0.3;
  app.add_option("--threads", threads, "OpenMP threads (and OpenBLAS threads)")->check(CLI::Range(1, 1024));
  app.add_option("--n", ns, "activation rows per call");
  app.add_option("--shape", only, "run only this shape (q_proj, ..., lm_head, model)");
  app.add_flag("!--no-blas", blas, "skip the OpenBLAS comparison");
  app.add_option("--budget", budget_s, "seconds of timing per measurement");
  std::string dtype_name = "bf16";
  app.add_option("--dtype", dtype_name,
                 "weight dtype: bf16, int8 (scales per row and 128 columns), u4 (4-bit GPTQ / AWQ: the same groups, "
                 "zero points) or fp8 (128x128 blocks)")
      ->check(CLI::IsMember({"bf16", "int8", "u4", "fp8"}));
  std::string compute_name = "f32";
  app.add_option("--compute-dtype", compute_name,
                 "matmul arithmetic for bf16 weights: f32 (exact) or bf16 (AMX or vdpbf16ps; no OpenBLAS comparison)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  bool cpu_time = false;
  app.add_flag("--cpu-time", cpu_time,
               "time by the thread's CPU time (implies --threads 1): kernel efficiency on a machine shared with others");
  CLI11_PARSE(app, argc, argv);
  if (cpu_time) threads = 1, bench_clock = timing::thread_cpu;
  // Quantized weights view the arena's random bytes as codes (FP8's NaN codes read as +-480: a
  // timing, not a result), with one scale array shared by every copy (scales are ~3% of the bytes).
  const troupe::dtype wtype = dtype_name == "int8" ? troupe::dtype::i8
                              : dtype_name == "u4" ? troupe::dtype::u4
                              : dtype_name == "fp8" ? troupe::dtype::f8_e4m3
                                                    : troupe::dtype::bf16;
  const int64_t bits = wtype == troupe::dtype::u4 ? 4 : 8 * static_cast<int64_t>(troupe::dtype_size(wtype));  // per weight
  const tk::compute_dtype compute = compute_name == "bf16" ? tk::compute_dtype::bf16 : tk::compute_dtype::f32;
  if (wtype != troupe::dtype::bf16) blas = false;
  if (compute == tk::compute_dtype::bf16) blas = false;  // OpenBLAS has no bf16-activation sgemm to compare
  std::vector<float> scales;  // the most rows (lm_head) times the most INT8 groups (down_proj)
  if (wtype != troupe::dtype::bf16) scales.assign(static_cast<size_t>(151936) * (3072 / 128), 1.0f / 127);
  std::vector<uint8_t> zeros(wtype == troupe::dtype::u4 ? scales.size() : 0, 8);  // u4: GPTQ's symmetric zero
  auto view = [&](const void* data, int64_t rows, int64_t cols) {
    tk::weight_ref w{data, wtype, rows, cols};
    if (wtype != troupe::dtype::bf16) {
      w.scales = scales.data();
      w.group_rows = wtype == troupe::dtype::f8_e4m3 ? 128 : 1;
      w.group_cols = 128;
      if (wtype == troupe::dtype::u4) w.zeros = zeros.data();
    }
    return w;
  };
  omp_set_num_threads(threads);
#ifdef TROUPE_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#else
  blas = false;
#endif

  const double bw = troupe::bench::measure_read_bandwidth_gbs(threads, bench_clock);
  // The peak of the arithmetic the call runs: the AMX tiles (a third of it for f32 compute of BF16
  // weights: three products per block), vdpbf16ps or the fp32 FMA.
  const bool bf16 = compute == tk::compute_dtype::bf16, amx = bf16 && std::string(tk::matmul_bf16_isa()) == "amx";
  const bool amx_f32 = !bf16 && dtype_name == "bf16" && std::string(tk::f32_arithmetic()) == "amx";
  const double peak = amx       ? troupe::bench::measure_amx_bf16_gflops(threads)
                      : amx_f32 ? troupe::bench::measure_amx_bf16_gflops(threads) / 3
                                : troupe::bench::measure_fma_gflops(threads, bf16, bench_clock);
  std::printf("matmul isa %s (quantized arithmetic %s), %s weights, %s compute, %d threads, %s time; machine: read %.1f GB/s, %s peak "
              "%.1f GFLOP/s\n",
              tk::matmul_isa(), tk::quant_arithmetic(), dtype_name.c_str(), compute_name.c_str(), threads, cpu_time ? "thread CPU" : "wall", bw,
              amx ? "AMX bf16" : amx_f32 ? "AMX f32 (bf16 peak / 3)" : bf16 ? "vdpbf16ps" : "fp32 FMA", peak);

  arena weights(size_t{1} << 30);
  std::vector<float> blas_w;
#ifdef TROUPE_HAVE_OPENBLAS
  if (blas) {
    std::vector<float> wf(2048 * 1024);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = troupe::bf16_to_f32(weights.data[i]);
    check_blas_invariance(wf.data(), 2048, 1024);
  }
#endif
  std::printf("%-10s %4s %9s %7s %5s %8s %6s | %9s %8s %7s\n", "shape", "n", "ms", "GB/s", "%bw", "GFLOP/s", "%peak",
              "blas ms", "GFLOP/s", "vs blas");

  for (const shape& s : qwen3_0_6b) {
    if (!only.empty() && only != s.name) continue;
    const int64_t per = s.rows * s.cols;
    const int64_t copies = std::max<int64_t>(1, static_cast<int64_t>(weights.data.size()) * 16 / (per * bits));
    auto ref = [&](int64_t c) {
      return view(reinterpret_cast<const char*>(weights.data.data()) + (c % copies) * per * bits / 8, s.rows, s.cols);
    };
    struct result {
      double ours = 0, theirs = 0;
    };
    std::vector<result> res(ns.size());
    for (size_t t = 0; t < ns.size(); ++t) {
      const int64_t n = ns[t];
      auto x = random_x(n * s.cols);
      std::vector<float> y(static_cast<size_t>(n * s.rows));
      res[t].ours = best_call_seconds(copies, budget_s, [&](int64_t c) { tk::matmul(x.data(), n, ref(c), y.data(), compute); });
    }
#ifdef TROUPE_HAVE_OPENBLAS
    if (blas) {
      blas_w.resize(static_cast<size_t>(per));
      for (size_t t = 0; t < ns.size(); ++t) {
        const int64_t n = ns[t];
        auto x = random_x(n * s.cols);
        std::vector<float> y(static_cast<size_t>(n * s.rows));
        res[t].theirs = best_call_seconds(copies, budget_s, [&](int64_t c) {
          blas_matmul(x.data(), n, static_cast<const uint16_t*>(ref(c).data), s.rows, s.cols, blas_w.data(), y.data());
        });
      }
      // OpenBLAS threads spin after a call: let them sleep before the next Troupe measurement.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
#endif
    for (size_t t = 0; t < ns.size(); ++t) {
      const int64_t n = ns[t];
      const double sec = res[t].ours, gbs = static_cast<double>(per * bits / 8) / sec / 1e9, gflops = 2.0 * n * per / sec / 1e9;
      std::printf("%-10s %4lld %9.3f %7.1f %4.0f%% %8.1f %5.0f%%", s.name, static_cast<long long>(n), sec * 1e3, gbs,
                  100 * gbs / bw, gflops, 100 * gflops / peak);
      if (res[t].theirs > 0)
        std::printf(" | %9.3f %8.1f %6.2fx\n", res[t].theirs * 1e3, 2.0 * n * per / res[t].theirs / 1e9,
                    res[t].theirs / sec);
      else
        std::printf(" |\n");
    }
  }

  // The whole model's matmuls in layer order: "model" = the 28 layers x 7 matrices (840 MB of bf16),
  // as quoted in docs since it was added; "model+lm" = the same then lm_head (311 MB more): every
  // weight a decode step reads from DRAM, so its "tokens/s of matmul" is the engine's rate with
  // nothing but matmuls (the layers' figure read ~25% above what an engine step can reach, which
  // looked like an engine overhead that was not there). Prefill's rate bounds the engine's tokens/s.
  if (only.empty() || only == "model") {
    std::vector<tk::weight_ref> layers;
    size_t offset = 0;  // bytes
    const size_t arena_bytes = weights.data.size() * 2;
    auto add = [&](const shape& s) {
      const size_t count = static_cast<size_t>(s.rows * s.cols * bits / 8);
      if (offset + count > arena_bytes) offset = 0;  // lm_head re-reads the arena's start: DRAM all the same
      layers.push_back(view(reinterpret_cast<const char*>(weights.data.data()) + offset, s.rows, s.cols));
      offset += count;
    };
    for (int l = 0; l < num_layers; ++l)
      for (const shape& s : qwen3_0_6b)
        if (std::strcmp(s.name, "lm_head") != 0) add(s);
    const size_t n_layers = layers.size();
    for (const shape& s : qwen3_0_6b)
      if (std::strcmp(s.name, "lm_head") == 0) add(s);
    for (const bool with_lm : {false, true}) {
      const size_t count = with_lm ? layers.size() : n_layers;
      double bytes = 0, flops_per_row = 0;
      int64_t max_rows = 0;
      for (size_t i = 0; i < count; ++i) {
        bytes += static_cast<double>(layers[i].bytes());
        flops_per_row += 2.0 * layers[i].rows * layers[i].cols;
        max_rows = std::max(max_rows, layers[i].rows);
      }
      for (int64_t n : ns) {
        auto x = random_x(n * 3072);
        std::vector<float> y(static_cast<size_t>(n * max_rows));
        const double sec = best_call_seconds(1, budget_s * 3, [&](int64_t) {
          for (size_t i = 0; i < count; ++i) tk::matmul(x.data(), n, layers[i], y.data(), compute);
        });
        const double gbs = bytes / sec / 1e9, gflops = flops_per_row * n / sec / 1e9;
        std::printf("%-10s %4lld %9.3f %7.1f %4.0f%% %8.1f %5.0f%% | %.0f tokens/s of %s\n", with_lm ? "model+lm" : "model",
                    static_cast<long long>(n), sec * 1e3, gbs, 100 * gbs / bw, gflops, 100 * gflops / peak, n / sec,
                    with_lm ? "matmul" : "the layers' matmuls (no lm_head)");
      }
    }
  }
  return 0;
}
