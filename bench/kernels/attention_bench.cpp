// troupe-bench-attention: kernels::paged_attention for one sequence's chunk of n_q query tokens
// at a given context (keys already in the pool), on one Qwen3-0.6B-shaped layer (16 query heads,
// 8 kv heads, head_dim 128, a float KV pool (INT8 / FP8 with --kv-dtype) in 16-token blocks scattered as a
// serving run leaves them). Prints time per call, and GFLOP/s against the FMA peak measured in the
// same run (2 flops per multiply-add; QK^T and PV, the causal half of the chunk counted exactly).
// The chunk shapes that matter: a prompt chunk paced beside decodes at a long context (n_q 8-32,
// context 1,000-4,000: docs/benchmarks.md, Serving) and a full prefill chunk (n_q 256-512).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/machine/machine_limits.hpp"
#include "kernels/kernels.hpp"

namespace tk = troupe::kernels;

namespace {

constexpr int64_t kHeads = 16, kKvHeads = 8, kDim = 128, kBlock = 16;

troupe::bench::timing g_clock = troupe::bench::timing::wall;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : x) v = u(rng);
  return x;
}

// Seconds per call (best of reps after a warm-up) for n_q queries after `context` keys.
double time_chunk(int64_t n_q, int64_t context, int reps, troupe::dtype kv_type) {
  const int64_t n_keys = context + n_q, blocks = (n_keys + kBlock - 1) / kBlock, row = kKvHeads * kDim;
  // Twice the blocks needed, the sequence's ones in random order: a pool other sequences share.
  const int64_t pool_blocks = 2 * blocks;
  std::vector<int32_t> all(static_cast<size_t>(pool_blocks));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(7));
  std::vector<int32_t> table(all.begin(), all.begin() + blocks);
  auto k = random_floats(static_cast<size_t>(pool_blocks * kBlock * row), 1);
  auto v = random_floats(k.size(), 2);
  auto q = random_floats(static_cast<size_t>(n_q * kHeads * kDim), 3);
  std::vector<float> out(q.size());
  tk::paged_kv_layer kv{k.data(), v.data(), static_cast<int32_t>(kBlock), static_cast<int32_t>(kKvHeads),
                        static_cast<int32_t>(kDim)};
  // A quantized pool: the sequence's keys and values stored through kv_write, as the engine does.
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs;
  if (kv_type != troupe::dtype::f32) {
    kc.resize(k.size()), vc.resize(k.size());
    ks.resize(static_cast<size_t>(pool_blocks * kBlock * kKvHeads)), vs.resize(ks.size());
    kv = tk::paged_kv_layer{nullptr, nullptr, static_cast<int32_t>(kBlock), static_cast<int32_t>(kKvHeads),
                            static_cast<int32_t>(kDim), kv_type, kc.data(), vc.data(), ks.data(), vs.data()};
    tk::kv_write(kv, table.data(), 0, n_keys, k.data(), v.data());
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  auto call = [&] {
    tk::paged_attention(q.data(), n_q, kHeads, static_cast<int32_t>(context), kv, table.data(), scale, out.data());
  };
  call();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = troupe::bench::now_seconds(g_clock);
    call();
    best = std::min(best, troupe::bench::now_seconds(g_clock) - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-bench-attention: paged attention of one chunk at a given context"};
  std::vector<int64_t> n_qs{8, 32, 512}, contexts{0, 1000, 3000};
  int reps = 5;
  app.add_option("--n-q", n_qs, "query tokens per chunk");
  app.add_option("--context", contexts, "keys already in the pool before the chunk");
  app.add_option("--reps", reps, "timed calls per shape (the best is reported)");
  bool cpu_time = false;
  bool skip_limits = false;
  app.add_flag("--skip-limits", skip_limits, "do not measure the FMA peak (for profiling, e.g. under valgrind; no ratios)");
  std::string kv_name = "f32";
  app.add_option("--kv-dtype", kv_name, "the pool's element type: f32, int8 or fp8 (as --kv-cache-dtype)")
      ->check(CLI::IsMember({"f32", "int8", "fp8"}));
  app.add_flag("--cpu-time", cpu_time,
               "one thread, timed by its CPU time: steadier on a shared machine (time another thread runs is left out)");
  CLI11_PARSE(app, argc, argv);
  if (cpu_time) {
    omp_set_num_threads(1);
    g_clock = troupe::bench::timing::thread_cpu;
  }
  const troupe::dtype kv_type =
      kv_name == "int8" ? troupe::dtype::i8 : kv_name == "fp8" ? troupe::dtype::f8_e4m3 : troupe::dtype::f32;
  const int threads = omp_get_max_threads();
  const double peak = skip_limits ? 0.0 : troupe::bench::measure_fma_gflops(threads, false, g_clock);
  std::printf("isa %s, %d threads, FP32 FMA peak %.1f GFLOP/s, KV pool %s\n", troupe::bench::machine_isa(), threads, peak,
              kv_name.c_str());
  std::printf("%6s %8s %10s %12s %9s %8s\n", "n_q", "context", "ms/call", "us/query", "GFLOP/s", "of peak");
  for (int64_t nq : n_qs)
    for (int64_t ctx : contexts) {
      const double s = time_chunk(nq, ctx, reps, kv_type);
      // Keys seen: query t sees ctx + t + 1; per key and query head 2 * kDim multiply-adds.
      const double keys = static_cast<double>(nq) * ctx + nq * (nq + 1) / 2.0;
      const double gflop = keys * kHeads * kDim * 2 * 2 / 1e9;
      std::printf("%6lld %8lld %10.3f %12.1f %9.1f %7.0f%%\n", static_cast<long long>(nq), static_cast<long long>(ctx),
                  s * 1e3, s * 1e6 / nq, gflop / s, peak > 0 ? 100 * gflop / s / peak : 0.0);
    }
  return 0;
}
