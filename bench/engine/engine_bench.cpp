// troupe-bench-engine: the core engine's speed against this machine's own limits, in one run.
// Measures read bandwidth and FMA peak first, then load time, 512-token prefill, and decode at
// batch 1, 8 and 32 on a checkpoint (the Qwen3-0.6B-shaped one from bench/engine/run.sh), once per
// compute dtype (--compute-dtype f32,bf16: the exact path and bf16 activations), with the
// bf16 / f32 ratios of the same run at the end. --quantization int8|fp8 quantizes the linear weights on
// load, as troupe does, to profile a quantized model's steps the same way. --tensor-parallel-size 1,2
// measures each group size in turn (--enable-expert-parallel: each size above 1 twice, experts
// sliced and experts whole), with the ratios and each group's own memory at the end.
#include <CLI/CLI.hpp>
#include <malloc.h>
// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593), as in kernels/cpu.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/decode_rate.hpp"
#include "bench/machine/machine_limits.hpp"
#include "kernels/kernels.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/parallel_runner.hpp"
#include "runtime/quant/load.hpp"

using namespace troupe;
using clk = std::chrono::steady_clock;

static double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

// Multiply-adds x 2 of the linear layers for one token (MoE: the router and top-k experts).
static double layer_flops_per_token(const checkpoint& ck) {
  auto e = [](const kernels::weight_ref& w) { return static_cast<double>(w.rows) * static_cast<double>(w.cols); };
  double p = 0;
  for (int64_t l = 0; l < ck.config.num_hidden_layers; ++l) {
    const auto& lw = ck.weights.layers[l];
    p += e(lw.q_proj) + e(lw.k_proj) + e(lw.v_proj) + e(lw.o_proj);
    if (!ck.config.layer_is_moe(l)) {
      p += e(lw.gate_proj) + e(lw.up_proj) + e(lw.down_proj);
    } else {
      p += e(lw.router);
      if (!lw.experts.empty())
        p += static_cast<double>(ck.config.num_experts_per_tok) *
             (e(lw.experts[0].gate_proj) + e(lw.experts[0].up_proj) + e(lw.experts[0].down_proj));
    }
  }
  return 2 * p;
}

// Bytes one decoded token reads at batch 1: every weight, except that a mixture-of-experts layer
// reads only the top-k experts a token is routed to (k of E, num_experts_per_tok of num_experts).
static double decode_read_bytes(const checkpoint& ck) {
  auto b = [](const kernels::weight_ref& w) { return static_cast<double>(w.bytes() + w.scale_bytes()); };
  double unused = 0;
  const double k = static_cast<double>(ck.config.num_experts_per_tok), n = static_cast<double>(ck.config.num_experts);
  for (int64_t l = 0; l < ck.config.num_hidden_layers; ++l)
    if (ck.config.layer_is_moe(l) && n > 0)
      for (const auto& ex : ck.weights.layers[l].experts)
        unused += (1.0 - k / n) * (b(ex.gate_proj) + b(ex.up_proj) + b(ex.down_proj));
  return static_cast<double>(ck.weights.bytes) - unused;
}

// vdpbf16ps peak over `threads` threads (64 flops per instruction; 0 without AVX512_BF16): what
// bf16 compute can reach at best, beside the FP32 FMA peak. 24 independent accumulators, as
// matmul's 3 x 8 tiles have.
__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_thread_gflops() {
  __m512 acc[24];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = a;
  const long iters = 4000000;
  const auto t0 = clk::now();
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int k = 0; k < 24; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
    asm volatile("" : "+v"(a));
  }
  const double s = seconds_since(t0);
  float sink = 0;
  for (auto& v : acc) sink += _mm512_reduce_add_ps(v);
  asm volatile("" : : "x"(sink));
  return iters * 24.0 * 64.0 / s / 1e9;
}

static double measure_dpbf16_gflops(int threads) {
  if (!__builtin_cpu_supports("avx512bf16")) return 0.0;
  std::vector<double> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&got, t] { got[t] = dpbf16_thread_gflops(); });
  for (auto& th : pool) th.join();
  return std::accumulate(got.begin(), got.end(), 0.0);
}

// Bytes the process has allocated and not freed (heap and mmapped chunks): the difference across a
// runner's construction and first step is what it owns (shard copies, KV pools, scratch), whatever
// the allocator reuses.
static double allocated_mb() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / 1e6;
}

static double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

int main(int argc, char** argv) {
  const auto process_start = clk::now();
  CLI::App app{"Troupe engine benchmark"};
  std::string model;
  int threads = 0, prefill_len = 512, decode_steps = 32, reps = 3, context = 64;
  app.add_option("--model", model, "checkpoint directory (e.g. made by troupe make-checkpoint --preset qwen3-0.6b)")->required();
  app.add_option("--threads", threads, "threads used for the machine limits (default: all cores)");
  app.add_option("--prefill-len", prefill_len);
  app.add_option("--decode-steps", decode_steps);
  app.add_option("--context", context, "tokens each decoding sequence already holds");
  app.add_option("--reps", reps, "repetitions; the best is reported");
  std::vector<int> batches{1, 4, 8, 32};
  bool skip_limits = false;
  app.add_option("--batches", batches, "decode batch sizes (the first is the ratios' base; 0: no decode)")->delimiter(',');
  app.add_flag("--skip-limits", skip_limits, "do not measure the machine (for profiling; no ratios)");
  bool no_mmap = false;
  app.add_flag("--no-mmap", no_mmap, "read the weights into 2 MB pages (troupe --no-mmap) instead of mapping the file");
  std::string quantization = "none";
  app.add_option("--quantization", quantization, "quantize the linear weights on load (none|int8|fp8), as troupe --quantization");
  bool four_bit_as_int8 = false;
  app.add_flag("--four-bit-as-int8", four_bit_as_int8,
               "widen a GPTQ / AWQ model's 4-bit weights to INT8 codes (one byte a weight) instead of keeping them 4-bit");
  // bf16 compute by default only where vdpbf16ps runs it: elsewhere it is the portable emulation
  // (same bits, ~100x slower), which turned a 2-minute run into 20+ minutes on AVX2-only CPUs.
  const bool native_bf16 = std::string(kernels::matmul_bf16_isa()) != "portable";
  std::vector<std::string> compute_names{"f32"};
  if (native_bf16) compute_names.push_back("bf16");
  int lora_rank = 0;
  app.add_option("--lora-rank", lora_rank,
                 "also decode each batch with a random LoRA adapter of this rank on every projection (0: no)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--compute-dtype", compute_names,
                 "matmul arithmetic(s) for BF16 weights, each measured in turn (default f32, plus bf16 where the CPU "
                 "has AVX512_BF16 or AMX)")
      ->delimiter(',');
  std::vector<int> tp_sizes{1};
  app.add_option("--tensor-parallel-size", tp_sizes,
                 "CPU shards to split each step over; several (1,2) are each measured, with their ratios to the first")
      ->delimiter(',');
  std::vector<int> pp_sizes{1};
  app.add_option("--pipeline-parallel-size", pp_sizes,
                 "pipeline stages to split the layers over; several (1,2) are each measured, for every shard count")
      ->delimiter(',');
  std::string pipeline_layers, pipeline_schedule = "auto";
  app.add_option("--pipeline-schedule", pipeline_schedule, "with --pipeline-parallel-size above 1: auto, wavefront or in_turn");
  app.add_option("--pipeline-layers", pipeline_layers, "with --pipeline-parallel-size above 1: each stage's layer count (10,8,10)");
  bool expert_parallel = false;
  app.add_flag("--enable-expert-parallel", expert_parallel,
               "measure each size above 1 twice: experts sliced (tensor parallel) and whole experts per shard");
  CLI11_PARSE(app, argc, argv);
  // The group layouts measured, in order: each size, then (asked) its expert-parallel twin.
  std::vector<parallel_config> layouts;
  for (const int pp : pp_sizes)
    for (const int tp : tp_sizes) {
      layouts.emplace_back(tp, false);
      if (expert_parallel && tp > 1) layouts.emplace_back(tp, true);
      for (size_t i = layouts.size() - (expert_parallel && tp > 1 ? 2 : 1); i < layouts.size(); ++i)
        if ((layouts[i].pipeline_size = pp) > 1) {
          layouts[i].pipeline_layers = parse_pipeline_layers(pipeline_layers, "--pipeline-layers");
          layouts[i].schedule = parse_pipeline_schedule(pipeline_schedule, "--pipeline-schedule");
        }
    }
  auto layout_name = [](const parallel_config& p) {
    return "tp " + std::to_string(p.size) + (p.expert_parallel ? " ep" : "") +
           (p.pipeline_size > 1 ? " pp " + std::to_string(p.pipeline_size) + " " + to_string(resolved_schedule(p)) : "");
  };
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows line by line even when redirected
  std::vector<kernels::compute_dtype> computes;
  try {
    for (const auto& name : compute_names) computes.push_back(parse_compute_dtype(name));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

  quant::load_options load;
  load.weights = no_mmap ? residency::huge_pages : residency::mapped;
  load.four_bit_codes = !four_bit_as_int8;
  try {
    load.quantization = quant::parse_method(quantization, "--quantization");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  auto ck = quant::load_model(model, load);
  const double load_s = seconds_since(process_start);
  std::printf("weights: %s\n", no_mmap ? "read into 2 MB pages (--no-mmap)" : "memory-mapped files");
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());

  const double bw = skip_limits ? 0.0 : bench::measure_read_bandwidth_gbs(threads);
  const double bw_small = skip_limits ? 0.0 : bench::measure_read_bandwidth_gbs(threads, bench::timing::wall, false);
  const double fma = skip_limits ? 0.0 : bench::measure_fma_gflops(threads, false);
  const double dpbf16 = skip_limits ? 0.0 : measure_dpbf16_gflops(threads);
  const double amx = skip_limits ? 0.0 : bench::measure_amx_bf16_gflops(threads);
  const double weight_gb = static_cast<double>(ck->weights.bytes) / 1e9;
  std::printf("machine: %d threads, read bandwidth %.1f GB/s (2 MB pages; %.1f GB/s with 4 KB pages), FP32 FMA peak "
              "%.0f GFLOP/s, vdpbf16ps peak %.0f GFLOP/s, AMX bf16 peak %.0f GFLOP/s, matmul ISA %s (bf16 compute: %s; f32 "
              "compute of BF16 weights: %s)\n",
              threads, bw, bw_small, fma, dpbf16, amx, kernels::matmul_isa(), kernels::matmul_bf16_isa(),
              std::string(kernels::f32_arithmetic()) == "amx" ? "AMX tiles, x split in three bf16 parts" : "FMA");
  const double read_gb = decode_read_bytes(*ck) / 1e9;
  std::printf("model: %s, %lld layers, hidden %lld, weights %.3f GB, read per decoded token at batch 1 %.3f GB\n",
              model.c_str(), static_cast<long long>(ck->config.num_hidden_layers),
              static_cast<long long>(ck->config.hidden_size), weight_gb, read_gb);
  std::printf("load: %.3f s from process start to ready\n", load_s);
  // The same reads over the weights' own memory (the files' mappings, or their --no-mmap copies):
  // on a VM, memory held a while can read slower than the probe's fresh buffer (docs/engine.md,
  // "Weights in the page cache"), and then no kernel reaches the probe's ceiling.
  double weights_ceiling = 0;
  if (!skip_limits && load.quantization == quant::method::none) {
    std::vector<std::pair<const void*, size_t>> spans;
    for (const auto& f : ck->files) spans.emplace_back(f.data(), f.size());
    const double bw_weights = bench::measure_read_bandwidth_gbs_of(spans, threads);
    weights_ceiling = bw_weights / read_gb;
    std::printf("the weights' own memory reads %.1f GB/s (%.0f%% of the probe's): a batch-1 ceiling of %.1f tokens/s "
                "from it\n",
                bw_weights, bw > 0 ? 100.0 * bw_weights / bw : 0.0, weights_ceiling);
  }

  std::map<kernels::compute_dtype, double> prefill_rate;
  std::map<std::pair<kernels::compute_dtype, int>, double> decode_rate;
  std::map<std::pair<size_t, int>, double> tp_rate;  // (layout, batch; 0: prefill) -> tokens/s, first compute dtype
  std::map<size_t, double> layout_mb;                // layout -> MB its prefill runner allocated
  for (size_t li = 0; li < layouts.size(); ++li)
  for (const kernels::compute_dtype compute : computes) {
    const parallel_config& layout = layouts[li];
    const std::string label_text =
        std::string(to_string(compute)) +
        (layouts.size() > 1 || layout.size > 1 || layout.pipeline_size > 1 ? " " + layout_name(layout) : "");
    const char* label = label_text.c_str();
    // Prefill: one step over a prompt of prefill_len random ids.
    if (prefill_len > 0) {
      const int bs = 16, blocks = (prefill_len + bs - 1) / bs;
      const double mb0 = allocated_mb();
      parallel_runner runner(*ck, blocks, bs, dtype::f32, {compute}, layout);
      std::vector<int32_t> table(blocks), prompt(prefill_len);
      std::iota(table.begin(), table.end(), 0);
      std::mt19937 rng(7);
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % ck->config.vocab_size);
      double best = 1e30, best_cpu = 1e30;
      step_result res;
      for (int r = 0; r < reps; ++r) {
        step_sequence sq{0, prompt, 0, table, logits_mode::last};
        auto t0 = clk::now();
        const double c0 = bench::process_cpu_seconds();
        runner.step(std::span<const step_sequence>(&sq, 1), res);
        best = std::min(best, seconds_since(t0));
        best_cpu = std::min(best_cpu, (bench::process_cpu_seconds() - c0) / threads);
      }
      if (compute == computes.front()) layout_mb[li] = allocated_mb() - mb0;
      // The layers for every prompt token, the vocabulary projection for the last one only.
      const double flops = layer_flops_per_token(*ck) * prefill_len + 2.0 * static_cast<double>(ck->weights.lm_head.rows) *
                                                                       static_cast<double>(ck->weights.lm_head.cols);
      if (li == 0) prefill_rate[compute] = prefill_len / best;
      if (compute == computes.front()) tp_rate[{li, 0}] = prefill_len / best;
      // The peak the linear layers run against: the AMX tiles' (a third of it in f32, three
      // products per block) where BF16 weights go there, else the FP32 FMA's.
      const bool tiles = amx > 0 && ck->weights.lm_head.type == dtype::bf16 &&
                         (compute == kernels::compute_dtype::bf16 ? std::string(kernels::matmul_bf16_isa()) == "amx"
                                                                  : std::string(kernels::f32_arithmetic()) == "amx");
      const double peak = !tiles ? fma : compute == kernels::compute_dtype::bf16 ? amx : amx / 3;
      const char* peak_name = !tiles ? "FMA peak" : compute == kernels::compute_dtype::bf16 ? "AMX bf16 peak" : "AMX bf16 peak / 3";
      std::printf("[%s] prefill %d tokens: %.1f tokens/s (%.3f s; %.0f GFLOP/s in linear layers, %.0f%% of the %s; the "
                  "linear layers alone at that peak: %.0f tokens/s)\n",
                  label, prefill_len, prefill_len / best, best, flops / best / 1e9, 100.0 * flops / best / 1e9 / peak,
                  peak_name, prefill_len * peak * 1e9 / flops);
      std::printf("  cpu: %.1f tokens/s (%.3f s of CPU per thread)\n", prefill_len / best_cpu, best_cpu);
    }

    const double ceiling = bw / read_gb;
    double b1 = 0, b1_cpu = 0;
    for (int batch : batches) {
      if (batch <= 0) continue;
      double best = 0, best_cpu = 0;
      for (int r = 0; r < reps; ++r) {
        const bench::decode_speed got =
            bench::measure_decode(*ck, batch, context, decode_steps, threads, {compute}, dtype::f32, nullptr, layout);
        best = std::max(best, got.wall);
        best_cpu = std::max(best_cpu, got.cpu);
      }
      if (b1 == 0) {
        b1 = best, b1_cpu = best_cpu;
        if (ceiling > 0 && weights_ceiling > 0)
          std::printf("[%s] decode batch %d: %.1f tokens/s = %.0f%% of the bandwidth ceiling (%.1f tokens/s), %.0f%% of the "
                      "weights' own\n",
                      label, batch, best, 100.0 * best / ceiling, ceiling, 100.0 * best / weights_ceiling);
        else if (ceiling > 0)
          std::printf("[%s] decode batch %d: %.1f tokens/s = %.0f%% of the bandwidth ceiling (%.1f tokens/s)\n", label, batch,
                      best, 100.0 * best / ceiling, ceiling);
        else  // --skip-limits: no ceiling measured
          std::printf("[%s] decode batch %d: %.1f tokens/s\n", label, batch, best);
      } else {
        std::printf("[%s] decode batch %d: %.1f tokens/s = %.1fx batch 1\n", label, batch, best, best / b1);
      }
      std::printf("  cpu: %.1f tokens/s = %.1fx\n", best_cpu, best_cpu / b1_cpu);
      if (li == 0) decode_rate[{compute, batch}] = best;
      if (compute == computes.front()) tp_rate[{li, batch}] = best;
      if (lora_rank > 0) {
        // Alternated with runs without it, so a drifting machine moves both alike; over a group,
        // each shard runs its share of the pairs (lora_shard.hpp).
        const auto adapter = bench::random_lora(ck->config, lora_rank);
        double with = 0, without = 0;
        for (int r = 0; r < reps; ++r) {
          with = std::max(with, bench::measure_decode(*ck, batch, context, decode_steps, threads, {compute}, dtype::f32,
                                                      adapter, layout)
                                    .wall);
          without = std::max(without, bench::measure_decode(*ck, batch, context, decode_steps, threads, {compute},
                                                            dtype::f32, nullptr, layout)
                                          .wall);
        }
        std::printf("[%s] decode batch %d with a rank-%d LoRA on every projection: %.1f tokens/s = %.3fx without (%.1f)\n",
                    label, batch, lora_rank, with, with / without, without);
      }
    }
  }
  // bf16 against f32, both measured above in this process.
  const auto f32 = kernels::compute_dtype::f32, bf16 = kernels::compute_dtype::bf16;
  if (prefill_rate.count(f32) && prefill_rate.count(bf16))
    std::printf("bf16 / f32: prefill %.2fx\n", prefill_rate[bf16] / prefill_rate[f32]);
  for (int batch : batches)
    if (decode_rate.count({f32, batch}) && decode_rate.count({bf16, batch}))
      std::printf("bf16 / f32: decode batch %d %.2fx\n", batch, decode_rate[{bf16, batch}] / decode_rate[{f32, batch}]);
  // Each group layout against the first (and an expert-parallel one against the same size's
  // sliced experts), the first compute dtype, measured above.
  auto ratios = [&](size_t a, size_t b) {
    const std::string an = layout_name(layouts[a]), bn = layout_name(layouts[b]);
    if (tp_rate.count({a, 0}) && tp_rate.count({b, 0}))
      std::printf("%s / %s: prefill %.2fx\n", an.c_str(), bn.c_str(), tp_rate[{a, 0}] / tp_rate[{b, 0}]);
    for (int batch : batches)
      if (batch > 0 && tp_rate.count({a, batch}) && tp_rate.count({b, batch}))
        std::printf("%s / %s: decode batch %d %.2fx\n", an.c_str(), bn.c_str(), batch, tp_rate[{a, batch}] / tp_rate[{b, batch}]);
  };
  for (size_t i = 1; i < layouts.size(); ++i) {
    ratios(i, 0);
    if (layouts[i].expert_parallel && i > 1) ratios(i, i - 1);
  }
  if (layouts.size() > 1)
    for (const auto& [li, mb] : layout_mb)
      std::printf("%s: %.0f MB allocated by the runner for a %d-token prefill (weight copies, KV pools, scratch)\n",
                  layout_name(layouts[li]).c_str(), mb, prefill_len);
  // How much of the files' memory 2 MB pages mapped once the steps had touched it: a mapping gets
  // them only where the page cache holds the file in 2 MB folios (docs/engine.md, "Weights in the
  // page cache"); 4 KB pages cost mapped decode 1-3% there.
  if (load.quantization == quant::method::none) {  // quantized on load, the weights are not the files
    size_t file_bytes = 0, huge_bytes = 0;
    for (const auto& f : ck->files) {
      file_bytes += f.size();
      huge_bytes += f.huge_page_bytes();
    }
    std::printf("weights on 2 MB pages after the runs: %.0f%% of the files' %.0f MB\n",
                file_bytes ? 100.0 * static_cast<double>(huge_bytes) / static_cast<double>(file_bytes) : 0.0,
                static_cast<double>(file_bytes) / 1e6);
  }
  std::printf("peak RSS: %.0f MB (weights mapped %.0f MB)\n", peak_rss_mb(), weight_gb * 1e3);
  return 0;
}
