// troupe-bench-cuda-gemm: the FP8 block GEMM (kernels/cuda/gemm.hpp) against cuBLAS BF16 on
// Qwen3-8B's linear shapes, with the device's copy bandwidth measured in the same run as the
// ceiling for weight streaming. For each (shape, n) it times the automatic path (decode kernel
// for n <= 16, cuBLASLt for n >= 64, printed) and the first own kernel (mma) forced, both first
// checked against the host reproduction (first tokens only); the exit code is 1 if any check
// fails, 77 without a device.
//
// Usage: troupe-bench-cuda-gemm [--quick]   (--quick: n = 1 and 128 only, fewer repetitions)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/fp8_reference.hpp"
#include "kernels/cuda/gemm.hpp"
#include "bench/cuda/device_timing.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/error.hpp"

namespace cu = troupe::kernels::cuda;
namespace ref = troupe::kernels::cuda::reference;
using troupe::bench::cuda::check;
using troupe::bench::cuda::copy_bandwidth_gbs;
using troupe::bench::cuda::time_ms;

namespace {


struct shape {
  const char* name;
  int64_t rows, cols;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (cu::device_count() == 0) {
    std::printf("troupe-bench-cuda-gemm: no CUDA device; nothing to measure\n");
    return 77;
  }
  try {
    std::printf("device: %s\n", cu::describe_device(0).c_str());
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    const double l2_bytes = prop.l2CacheSize;
    const double bw = copy_bandwidth_gbs();
    std::printf("device-to-device copy bandwidth (read + write): %.0f GB/s; L2 %.0f MB\n", bw, l2_bytes / 1e6);
    std::printf("weights are rotated over enough copies to exceed 4x L2, so each call streams them from DRAM\n\n");

    const shape shapes[] = {{"q/o_proj", 4096, 4096}, {"k/v_proj", 1024, 4096}, {"gate/up_proj", 12288, 4096},
                            {"down_proj", 4096, 12288}};
    const std::vector<int64_t> batches = quick ? std::vector<int64_t>{1, 128} : std::vector<int64_t>{1, 8, 16, 64, 128, 2048};
    cu::blas_handle blas;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    int failures = 0;

    std::printf("%-13s %6s %5s | %-8s %9s %8s %8s %6s | %9s %8s | %9s %8s %8s %6s | %8s | %s\n", "shape", "rows", "n",
                "path", "fp8 us", "TFLOP/s", "w GB/s", "of bw", "mma us", "TFLOP/s", "bf16 us", "TFLOP/s", "w GB/s",
                "of bw", "bf16/fp8", "check auto/mma");
    for (const shape& s : shapes) {
      const size_t wn = static_cast<size_t>(s.rows * s.cols);
      // Host data: FP8 codes and block scales as a checkpoint holds them; BF16 = the same values.
      std::vector<uint8_t> codes(wn);
      for (auto& c : codes) c = troupe::f32_to_f8e4m3(normal(rng) * 110.0f);
      const int64_t kbs = ref::col_blocks(s.cols);
      std::vector<float> scales(static_cast<size_t>(((s.rows + 127) / 128) * kbs));
      for (auto& v : scales) v = 1e-4f * (1.5f + 0.5f * std::tanh(normal(rng)));
      std::vector<uint16_t> wbf(wn);
      for (size_t i = 0; i < wn; ++i)
        wbf[i] = troupe::f32_to_bf16(troupe::f8e4m3_to_f32(codes[i]) *
                                     scales[(i / s.cols / 128) * kbs + (i % s.cols) / 128]);
      const int copies = static_cast<int>(std::clamp(4.0 * l2_bytes / (2.0 * wn), 1.0, 64.0));
      std::vector<cu::device_buffer> w8, w16;
      for (int c = 0; c < copies; ++c) {
        w8.emplace_back(wn);
        w8.back().upload(codes.data(), wn);
        w16.emplace_back(wn * 2);
        w16.back().upload(wbf.data(), wn * 2);
      }
      cu::device_buffer dscales(scales.size() * 4);
      dscales.upload(scales.data(), dscales.size_bytes());

      for (const int64_t n : batches) {
        std::vector<float> x(static_cast<size_t>(n * s.cols));
        for (auto& v : x) v = normal(rng);
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) xb[i] = troupe::f32_to_bf16(x[i]);
        cu::device_buffer dx(x.size() * 4), dxb(xb.size() * 2), dy(static_cast<size_t>(n * s.rows) * 4),
            ws(cu::fp8_workspace_bytes(n, s.cols));
        dx.upload(x.data(), dx.size_bytes());
        dxb.upload(xb.data(), dxb.size_bytes());

        // Check the first tokens of each path against the host reproduction (2^-10 of the sum of |products|).
        const int64_t nc = std::min<int64_t>(n, 4);
        std::vector<double> y_ref, l1;
        ref::matmul(ref::quantize(x.data(), nc, s.cols), codes.data(), scales.data(), s.rows, y_ref, l1);
        auto run = [&](cu::fp8_path want, int i) {
          return cu::matmul_fp8_block(dx.data(), cu::act_type::f32, n, w8[i % copies].as<uint8_t>(), dscales.as<float>(),
                                      s.rows, s.cols, dy.as<float>(), ws.data(), nullptr, want);
        };
        auto check_path = [&](cu::fp8_path want, cu::fp8_path& ran) {
          ran = run(want, 0);
          cu::synchronize();
          std::vector<float> y(static_cast<size_t>(nc * s.rows));
          dy.download(y.data(), y.size() * 4);
          size_t bad = 0;
          for (size_t i = 0; i < y.size(); ++i) bad += !(std::fabs(y[i] - y_ref[i]) <= l1[i] / 1024);
          failures += bad > 0;
          return bad ? "FAILED(" + std::to_string(bad) + "/" + std::to_string(y.size()) + ")" : std::string("ok");
        };
        cu::fp8_path auto_path{}, mma_path{};
        const std::string ok_auto = check_path(cu::fp8_path::automatic, auto_path);
        const std::string ok_mma = check_path(cu::fp8_path::mma, mma_path);

        const double flop = 2.0 * static_cast<double>(n) * s.rows * s.cols;
        const int reps = quick ? 10 : static_cast<int>(std::clamp(2e11 / flop, 20.0, 200.0));
        const double t8 = time_ms([&](int i) { run(cu::fp8_path::automatic, i); }, reps);
        const double tm = time_ms([&](int i) { run(cu::fp8_path::mma, i); }, reps);
        const double t16 = time_ms(
            [&](int i) {
              cu::matmul_bf16_cublas(blas, dxb.as<uint16_t>(), n, w16[i % copies].as<uint16_t>(), s.rows, s.cols,
                                     dy.as<float>(), nullptr);
            },
            reps);
        const double gb8 = static_cast<double>(wn + scales.size() * 4) / (t8 * 1e-3) / 1e9;
        const double gb16 = static_cast<double>(wn * 2) / (t16 * 1e-3) / 1e9;
        std::printf("%-13s %6lld %5lld | %-8s %9.1f %8.1f %8.0f %5.0f%% | %9.1f %8.1f | %9.1f %8.1f %8.0f %5.0f%% | %7.2fx | "
                    "%s/%s\n",
                    s.name, static_cast<long long>(s.rows), static_cast<long long>(n), cu::fp8_path_name(auto_path),
                    t8 * 1e3, flop / (t8 * 1e-3) / 1e12, gb8, 100 * gb8 / bw, tm * 1e3, flop / (tm * 1e-3) / 1e12,
                    t16 * 1e3, flop / (t16 * 1e-3) / 1e12, gb16, 100 * gb16 / bw, t16 / t8, ok_auto.c_str(),
                    ok_mma.c_str());
        std::fflush(stdout);
      }
    }
    std::printf("\nfp8 us: activation quantization + GEMM through the automatic path (column path: decode = own\n"
                "kernel for n <= 16, cublaslt = cuBLASLt block-scaled FP8 for n >= 64, mma = own kernel otherwise),\n"
                "float32 activations in, float32 out; mma us: the same with the first own kernel forced; bf16 us:\n"
                "cublasGemmEx (bf16 in, float32 out). w GB/s: weight bytes / time; of bw: that over the copy\n"
                "bandwidth above; bf16/fp8: bf16 us over fp8 us.\n");
    if (failures) std::printf("CHECK FAILED for %d (shape, n) pairs\n", failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-bench-cuda-gemm: %s\n", e.what());
    return 2;
  }
}
