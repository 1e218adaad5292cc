// troupe-bench-cuda-forward: the CUDA forward step v0 (runtime/engine/cuda) on a Qwen3-0.6B-shaped
// random checkpoint (BF16, written once to $TROUPE_BENCH_MODEL_DIR or /tmp/troupe-cudafwd-qwen3-0.6b),
// with BF16 weights widened to float32 on the device and with FP8 weights (quantized on load, Qwen's
// 128 x 128 blocks). Times the prefill of a 512-token prompt and decode at batch 1, 8 and 32, and
// reports weight bytes per token and the weight-streaming bandwidth of a decode step as a fraction
// of the device-to-device copy bandwidth (measured as bench/cuda/gemm_bench.cpp does).
// Exit code 77 without a device. The tokenizer files come from $TROUPE_TOKENIZER_DIR, else
// ./models/qwen3-tokenizer (run from the repository root), else the build's source tree.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench/common/greedy.hpp"
#include "bench/cuda/device_timing.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/cuda/cuda_model_runner.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/quant/load.hpp"

namespace cu = troupe::kernels::cuda;
using namespace troupe;
using bench::cuda::check;
using bench::cuda::copy_bandwidth_gbs;

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }


std::vector<int32_t> ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(detail::mix64(seed * 1000003 + i) % vocab);
  return v;
}

constexpr int32_t kPrompt = 512, kContext = 64, kDecodeSteps = 16, kWarmSteps = 2;
constexpr int32_t kBatches[] = {1, 8, 32};

// Decode ms/step at each of kBatches, for the graphs-vs-eager ratio.
std::vector<double> run(const std::string& name, const checkpoint& ckpt, double bw_gbs, cuda_runner_options opts) {
  const auto t0 = clock_type::now();
  const int32_t per_seq = (kContext + kWarmSteps + kDecodeSteps + 15) / 16;
  const int32_t prompt_blocks = (kPrompt + 15) / 16;
  cuda_model_runner runner(ckpt, prompt_blocks + 32 * per_seq, 16, opts);
  std::vector<double> decode_ms;
  const double upload_s = seconds_since(t0);
  const int64_t vocab = ckpt.config.vocab_size;
  const double step_bytes = static_cast<double>(runner.weight_bytes_per_step());
  std::printf("\n[%s, %s] device weights %.2f GB (read per step %.2f GB), KV pool %.1f MB, upload %.1f s\n", name.c_str(),
              runner.graphs_enabled() ? "decode graphs" : "eager launches", static_cast<double>(runner.device_weight_bytes()) / 1e9, step_bytes / 1e9,
              static_cast<double>(runner.kv().bytes()) / 1e6, upload_s);

  // Prefill: one 512-token prompt, logits of its last token; 1 warm-up, 3 timed.
  {
    auto prompt = ids(kPrompt, vocab, 7);
    std::vector<int32_t> table(static_cast<size_t>(prompt_blocks));
    std::iota(table.begin(), table.end(), 0);
    step_sequence sq{0, prompt, 0, table, logits_mode::last};
    step_result r;
    runner.step(std::span<const step_sequence>(&sq, 1), r);
    const auto t = clock_type::now();
    for (int i = 0; i < 3; ++i) runner.step(std::span<const step_sequence>(&sq, 1), r);
    const double s = seconds_since(t) / 3;
    std::printf("  prefill %d tokens: %.2f ms, %.0f tokens/s\n", kPrompt, s * 1e3, kPrompt / s);
  }

  // Decode: B sequences of a 64-token context (one batched prefill step), 2 warm-up steps, 16 timed.
  for (int32_t batch : kBatches) {
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch)), ctx(static_cast<size_t>(batch));
    std::vector<step_sequence> seqs;
    for (int32_t i = 0; i < batch; ++i) {
      for (int32_t b = 0; b < per_seq; ++b) tables[static_cast<size_t>(i)].push_back(prompt_blocks + i * per_seq + b);
      ctx[static_cast<size_t>(i)] = ids(kContext, vocab, 100 + static_cast<uint64_t>(i));
      seqs.push_back({i, ctx[static_cast<size_t>(i)], 0, tables[static_cast<size_t>(i)], logits_mode::last});
    }
    step_result r;
    runner.step(seqs, r);
    std::vector<int32_t> next(static_cast<size_t>(batch));
    auto decode_step = [&](int32_t s) {
      bench::greedy_next(r, next);
      for (int32_t i = 0; i < batch; ++i) {
        seqs[static_cast<size_t>(i)] = {i, std::span<const int32_t>(&next[static_cast<size_t>(i)], 1), kContext + s,
                                        tables[static_cast<size_t>(i)], logits_mode::last};
      }
      runner.step(seqs, r);
    };
    for (int32_t s = 0; s < kWarmSteps; ++s) decode_step(s);
    const auto t = clock_type::now();
    for (int32_t s = kWarmSteps; s < kWarmSteps + kDecodeSteps; ++s) decode_step(s);
    const double step_s = seconds_since(t) / kDecodeSteps;
    const double gbs = step_bytes / step_s / 1e9;
    std::printf("  decode batch %2d: %.3f ms/step, %8.0f tokens/s, weight bytes/token %.3f GB, weights %.0f GB/s = %.1f%% of copy bw\n",
                batch, step_s * 1e3, batch / step_s, step_bytes / batch / 1e9, gbs, 100.0 * gbs / bw_gbs);
    decode_ms.push_back(step_s * 1e3);
  }
  return decode_ms;
}

// Both ways in one run: eager launches, then graphs, and the decode speed-up of graphs.
void run_both(const std::string& name, const checkpoint& ckpt, double bw_gbs) {
  cuda_runner_options eager;
  eager.graphs = false;
  const auto e = run(name, ckpt, bw_gbs, eager);
  const auto g = run(name, ckpt, bw_gbs, {});
  std::printf("  decode graphs vs eager launches:");
  for (size_t i = 0; i < e.size() && i < g.size(); ++i) std::printf("  batch %d %.2fx", kBatches[i], e[i] / g[i]);
  std::printf("\n");
}

// --profile: one eager decode step at batch 1 after a 64-token context, between
// cudaProfilerStart and Stop, for `ncu --profile-from-start off` (docs/cuda.md, "Profiling").
void profile_one_step(const std::string& name, const checkpoint& ckpt) {
  cuda_runner_options eager;
  eager.graphs = false;
  cuda_model_runner runner(ckpt, 16, 16, eager);
  auto ctx = ids(kContext, ckpt.config.vocab_size, 100);
  std::vector<int32_t> table(16);
  std::iota(table.begin(), table.end(), 0);
  step_result r;
  step_sequence sq{0, ctx, 0, table, logits_mode::last};
  runner.step(std::span<const step_sequence>(&sq, 1), r);
  std::vector<int32_t> next(1);
  for (int32_t s = 0; s < 3; ++s) {
    bench::greedy_next(r, next);
    sq = {0, std::span<const int32_t>(next.data(), 1), kContext + s, table, logits_mode::last};
    if (s == 2) check(cudaProfilerStart(), "cudaProfilerStart");
    runner.step(std::span<const step_sequence>(&sq, 1), r);
    if (s == 2) check(cudaProfilerStop(), "cudaProfilerStop");
  }
  std::printf("profiled one decode step: %s\n", name.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bool profile = argc > 1 && std::string(argv[1]) == "--profile";
  if (cu::device_count() == 0) {
    std::printf("troupe-bench-cuda-forward: no CUDA device; nothing to measure\n");
    return 77;
  }
  try {
    const auto t0 = clock_type::now();
    std::printf("device: %s\n", cu::describe_device(0).c_str());
    const char* env_dir = std::getenv("TROUPE_BENCH_MODEL_DIR");
    const std::string dir = env_dir != nullptr && *env_dir != '\0' ? env_dir : "/tmp/troupe-cudafwd-qwen3-0.6b";
    if (!std::filesystem::exists(dir + "/config.json")) {
      random_checkpoint_options o;
      o.seed = 1;
      o.weight_type = dtype::bf16;
      o.force = true;
      if (const char* t = std::getenv("TROUPE_TOKENIZER_DIR"); t != nullptr && *t != '\0')
        o.tokenizer_dir = t;
      else if (std::filesystem::exists("models/qwen3-tokenizer/tokenizer.json"))
        o.tokenizer_dir = "models/qwen3-tokenizer";
      const auto s = write_random_checkpoint(dir, preset_config("qwen3-0.6b"), qwen3_generation_defaults(), o);
      std::printf("wrote %s: %lld parameters, %.2f GB, %.1f s\n", dir.c_str(), static_cast<long long>(s.num_parameters),
                  static_cast<double>(s.weight_bytes) / 1e9, seconds_since(t0));
    }
    if (profile) {
      profile_one_step("bf16 widened to f32", *load_checkpoint(dir));
      quant::load_options lo;
      lo.quantization = quant::method::fp8;
      profile_one_step("fp8", *quant::load_model(dir, lo));
      return 0;
    }
    const double bw = copy_bandwidth_gbs();
    std::printf("device-to-device copy bandwidth (read + write): %.0f GB/s\n", bw);
    {
      auto ck = load_checkpoint(dir);
      run_both("bf16 checkpoint, weights widened to f32, cublasSgemm pedantic", *ck, bw);
    }
    {
      const auto t = clock_type::now();
      quant::load_options lo;
      lo.quantization = quant::method::fp8;
      auto ck = quant::load_model(dir, lo);
      std::printf("\nfp8 quantization on load: %.1f s\n", seconds_since(t));
      run_both("fp8 weights (128x128 blocks, W8A8 matmul_fp8_block; lm_head widened f32)", *ck, bw);
    }
    std::printf("\ntotal %.1f s\n", seconds_since(t0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-bench-cuda-forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
