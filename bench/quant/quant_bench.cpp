// troupe-bench-quant: INT8 / FP8 weights and KV cache against the float model, in one run on one
// checkpoint (the Qwen3-0.6B-shaped one from `troupe make-checkpoint --preset qwen3-0.6b`):
//   load time (float, INT8 quantized on load, pre-quantized INT8 written by the quantize writer),
//   decode tokens/s at batch 1 (BF16 vs INT8, interleaved repetitions, best of each) against the
//   read-bandwidth ceiling measured in the same run, prefill tokens/s, resident memory of each
//   model (one child process each), and accuracy (mean KL / top-1 vs the full-precision run).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/decode_rate.hpp"
#include "bench/machine/machine_limits.hpp"
#include "kernels/kernels.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/quant/divergence.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/quant/write.hpp"

using namespace troupe;
using clk = std::chrono::steady_clock;

namespace {

double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : ids) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    id = static_cast<int32_t>(s % static_cast<uint64_t>(vocab));
  }
  return ids;
}

// Decode tokens/s (wall) of `batch` sequences holding `context` tokens (bench/common/decode_rate.hpp).
double decode_rate(const checkpoint& ck, int context, int steps, dtype kv = dtype::f32, int batch = 1) {
  return bench::measure_decode(ck, batch, context, steps, 1, {}, kv).wall;
}

double prefill_rate(const checkpoint& ck, int len) {
  const int bs = 16, blocks = (len + bs - 1) / bs;
  kv_cache cache(ck.config, blocks, bs);
  model_runner runner(ck, cache);
  std::vector<int32_t> table(blocks), prompt = random_ids(len, ck.config.vocab_size, 5);
  std::iota(table.begin(), table.end(), 0);
  step_result res;
  step_sequence sq{0, prompt, 0, table, logits_mode::last};
  const auto t0 = clk::now();
  runner.step(std::span<const step_sequence>(&sq, 1), res);
  return len / since(t0);
}

long rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Resident memory (MB) of a fresh process that loads `dir` (quantizing to INT8 when `int8`) and
// decodes a few tokens: this binary run again with --rss-of. Not fork(): a child forked from a
// process whose OpenMP threads exist deadlocks at its first parallel region (libgomp's pool does
// not survive fork).
double child_rss_mb(const std::string& dir, bool int8) {
  // The path now: popen's shell would read /proc/self/exe as itself.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string cmd = "'" + self + "' --rss-of '" + dir + "'" + (int8 ? " --rss-int8" : "");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  long kb = -1;
  if (std::fscanf(p, "%ld", &kb) != 1) kb = -1;
  pclose(p);
  return kb / 1024.0;
}

// The child side of child_rss_mb: prints VmRSS in kB.
int rss_of(const std::string& dir, bool int8) {
  quant::load_options o;
  if (int8) o.quantization = quant::method::int8;
  auto ck = quant::load_model(dir, o);
  decode_rate(*ck, 16, 4);
  std::printf("%ld\n", rss_kb());
  return 0;
}

// runner.fp8_activations: FP8 products take e4m3-rounded activations (W8A8, what the CUDA FP8 path
// computes).
std::vector<float> logits(const checkpoint& ck, const std::vector<int32_t>& ids, float logit_scale, dtype kv = dtype::f32,
                          model_runner_options runner = {}) {
  auto& norm = const_cast<std::vector<float>&>(ck.weights.norm);
  for (auto& v : norm) v *= logit_scale;
  auto out = generator(ck).prompt_logits(ids, 0, kv, runner);
  for (auto& v : norm) v /= logit_scale;
  return out;
}

// Mean KL and top-1 agreement of every scheme against the float model, on random-id positions,
// with the final norm as it is and sharpened x8 (random weights give flat distributions).
void report_accuracy(const std::string& model, const checkpoint& bf16, int positions) {
  quant::load_options int8_opts;
  int8_opts.quantization = quant::method::int8;
  const auto ids = random_ids(positions, bf16.config.vocab_size, 1);
  const int64_t vocab = bf16.config.vocab_size;
  for (float scale : {1.0f, 8.0f}) {
    std::printf("accuracy, %d random-id positions, final norm x%.0f:\n", positions, scale);
    const auto ref = logits(bf16, ids, scale);
    auto report = [&](const char* what, const std::vector<float>& l) {
      const auto d = quant::compare_logits(ref, l, vocab);
      std::printf("  %-34s mean KL %.6f nat  max %.6f  top-1 %.3f\n", what, d.mean_kl, d.max_kl, d.top1_agreement);
    };
    for (int g : {0, 128, 64}) {
      quant::load_options o = int8_opts;
      o.group_size = g;
      auto q = quant::load_model(model, o);
      const std::string name = g == 0 ? "INT8 per output channel" : "INT8 group " + std::to_string(g);
      report(name.c_str(), logits(*q, ids, scale));
      if (g == 128) {
        report("INT8 group 128 + INT8 KV cache", logits(*q, ids, scale, dtype::i8));
        report("INT8 group 128 + FP8 KV cache", logits(*q, ids, scale, dtype::f8_e4m3));
      }
    }
    report("float weights + INT8 KV cache", logits(bf16, ids, scale, dtype::i8));
    report("float weights + FP8 KV cache", logits(bf16, ids, scale, dtype::f8_e4m3));
    quant::load_options f8;
    f8.quantization = quant::method::fp8;
    auto fp8 = quant::load_model(model, f8);
    report("FP8 (128x128 blocks, lm_head BF16)", logits(*fp8, ids, scale));
    model_runner_options w8a8;
    w8a8.fp8_activations = true;
    report("FP8 W8A8 (the CUDA path's scheme)", logits(*fp8, ids, scale, dtype::f32, w8a8));
    // FP8 KV beside FP8 weights, the pairing vLLM users run (an FP8 checkpoint, --kv-cache-dtype fp8).
    report("FP8 + FP8 KV cache", logits(*fp8, ids, scale, dtype::f8_e4m3));
    report("FP8 + INT8 KV cache", logits(*fp8, ids, scale, dtype::i8));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Troupe quantization benchmark (INT8 / FP8 weights and KV cache vs the float model)"};
  std::string model, work = std::filesystem::temp_directory_path() / "troupe-bench-quant";
  int threads = 0, context = 64, steps = 32, reps = 3, prefill_len = 128, positions = 64, long_context = 1500;
  bool skip_accuracy = false, accuracy_only = false;
  app.add_option("--model", model, "float checkpoint (troupe make-checkpoint --preset qwen3-0.6b)")->required();
  app.add_option("--work-dir", work, "where the pre-quantized INT8 copy is written (removed at the end)");
  app.add_option("--threads", threads, "threads for the bandwidth probe (default: all cores)");
  app.add_option("--context", context);
  app.add_option("--decode-steps", steps);
  app.add_option("--long-context", long_context, "context of the KV-dtype decode comparison (0: skip it; one run each)");
  app.add_option("--reps", reps, "interleaved repetitions; the best of each model is reported, and the median pair ratio");
  app.add_option("--prefill-len", prefill_len);
  app.add_option("--positions", positions, "random-id positions for the accuracy measurement");
  app.add_flag("--skip-accuracy", skip_accuracy);
  app.add_flag("--accuracy-only", accuracy_only, "only the KL / top-1 measurement (no loads, speeds, memory)");
  std::string rss_dir;
  bool rss_int8 = false;
  app.add_option("--rss-of", rss_dir, "(internal) load this model, decode, print VmRSS in kB");
  app.add_flag("--rss-int8", rss_int8, "(internal) with --rss-of: quantize to INT8 on load");
  app.get_option("--model")->required(false);
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures show line by line even when redirected
  if (!rss_dir.empty()) return rss_of(rss_dir, rss_int8);
  if (model.empty()) {
    std::fprintf(stderr, "troupe-bench-quant: --model is required\n");
    return 2;
  }
  if (reps < 1) {
    std::fprintf(stderr, "troupe-bench-quant: --reps must be at least 1\n");
    return 2;
  }
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (accuracy_only) {
    report_accuracy(model, *load_checkpoint(model), positions);
    return 0;
  }

  // ---- load ----
  auto t0 = clk::now();
  auto bf16 = load_checkpoint(model);
  const double load_float = since(t0);
  quant::load_options int8_opts;
  int8_opts.quantization = quant::method::int8;
  t0 = clk::now();
  auto on_load = quant::load_model(model, int8_opts);
  const double load_quantize = since(t0);
  const std::string pre_dir = work + "/int8";
  std::filesystem::remove_all(work);
  {
    quant::load_options o = int8_opts;
    o.release_source_pages = false;
    auto ck = load_checkpoint(model);
    quant::quantize_weights(*ck, o);
    quant::write_quantized_checkpoint(*ck, model, pre_dir);
  }
  t0 = clk::now();
  auto int8 = quant::load_model(pre_dir);
  const double load_pre = since(t0);
  std::printf("load: float %.3f s, INT8 quantized on load %.3f s, pre-quantized INT8 %.3f s\n", load_float, load_quantize,
              load_pre);

  // ---- decode / prefill ----
  const double bw = bench::measure_read_bandwidth_gbs(threads);
  const double gb_bf16 = static_cast<double>(bf16->weights.bytes) / 1e9, gb_int8 = static_cast<double>(int8->weights.bytes) / 1e9;
  std::printf("machine: %d threads, read bandwidth %.1f GB/s, matmul ISA %s (quantized arithmetic %s); weights read per token: "
              "BF16 %.3f GB, INT8 %.3f GB\n",
              threads, bw, kernels::matmul_isa(), kernels::quant_arithmetic(), gb_bf16, gb_int8);
  double best_bf16 = 0, best_int8 = 0;
  decode_rate(*int8, context, 2);  // first touch of the mapped pages
  decode_rate(*bf16, context, 2);
  // On a shared machine the speed drifts between repetitions: besides the best of each, the
  // median of the ratios of back-to-back pairs, which a drift slower than one pair leaves alone.
  std::vector<double> pair_ratios;
  for (int r = 0; r < reps; ++r) {
    const double b = decode_rate(*bf16, context, steps), i = decode_rate(*int8, context, steps);
    best_bf16 = std::max(best_bf16, b);
    best_int8 = std::max(best_int8, i);
    pair_ratios.push_back(i / b);
  }
  std::sort(pair_ratios.begin(), pair_ratios.end());
  const size_t mid = pair_ratios.size() / 2;
  const double median_ratio =
      pair_ratios.size() % 2 ? pair_ratios[mid] : (pair_ratios[mid - 1] + pair_ratios[mid]) / 2;
  std::printf("decode batch 1: BF16 %.1f tokens/s (%.0f%% of its ceiling %.1f), INT8 %.1f tokens/s (%.0f%% of its ceiling "
              "%.1f) = %.2fx BF16 (median of %d back-to-back pairs %.2fx, from %.2fx to %.2fx)\n",
              best_bf16, 100 * best_bf16 * gb_bf16 / bw, bw / gb_bf16, best_int8, 100 * best_int8 * gb_int8 / bw,
              bw / gb_int8, best_int8 / best_bf16, reps, median_ratio, pair_ratios.front(), pair_ratios.back());
  double kv8 = 0;
  for (int r = 0; r < reps; ++r) kv8 = std::max(kv8, decode_rate(*int8, context, steps, dtype::i8));
  std::printf("decode batch 1, INT8 weights + INT8 KV cache: %.1f tokens/s\n", kv8);
  // A long context, where the KV cache's bytes rival the weights' (float: 229 KB per token).
  if (long_context > 0) {
    std::printf("decode batch 1 at context %d, INT8 weights, KV cache", long_context);
    for (auto [kv, name] : {std::pair{dtype::f32, "float"}, std::pair{dtype::i8, "INT8"}, std::pair{dtype::f8_e4m3, "FP8"}})
      std::printf(" %s %.1f", name, decode_rate(*int8, long_context, steps, kv));
    std::printf(" tokens/s\n");
  }
  for (int batch : {4, 8, 16}) {
    double b16 = 0, i8 = 0;
    for (int r = 0; r < reps; ++r) {
      b16 = std::max(b16, decode_rate(*bf16, context, steps, dtype::f32, batch));
      i8 = std::max(i8, decode_rate(*int8, context, steps, dtype::f32, batch));
    }
    std::printf("decode batch %d: BF16 %.1f tokens/s (%.1fx batch 1), INT8 %.1f tokens/s (%.1fx batch 1) = %.2fx BF16\n", batch,
                b16, b16 / best_bf16, i8, i8 / best_int8, i8 / b16);
  }
  {
    // The same models read into anonymous 2 MB pages (--no-mmap): the page size the bandwidth
    // probe uses, so these are the figures comparable with its ceiling.
    on_load.reset();
    auto t1 = clk::now();
    auto bf16_huge = load_checkpoint(model, residency::huge_pages);
    const double load_bf16_huge = since(t1);
    quant::load_options huge;
    huge.weights = residency::huge_pages;
    t1 = clk::now();
    auto int8_huge = quant::load_model(pre_dir, huge);
    const double load_int8_huge = since(t1);
    quant::load_options huge_q = int8_opts;
    huge_q.weights = residency::huge_pages;
    t1 = clk::now();
    quant::load_model(model, huge_q).reset();
    const double load_quantize_huge = since(t1);
    double hb = 0, hi = 0;
    decode_rate(*int8_huge, context, 2);
    decode_rate(*bf16_huge, context, 2);
    for (int r = 0; r < reps; ++r) {
      hb = std::max(hb, decode_rate(*bf16_huge, context, steps));
      hi = std::max(hi, decode_rate(*int8_huge, context, steps));
    }
    std::printf("decode batch 1, weights on 2 MB pages (--no-mmap): BF16 %.1f tokens/s (%.0f%% of its ceiling), INT8 %.1f "
                "tokens/s (%.0f%% of its ceiling) = %.2fx BF16; loads: BF16 %.2f s, pre-quantized INT8 %.2f s, INT8 "
                "quantized on load %.2f s\n",
                hb, 100 * hb * gb_bf16 / bw, hi, 100 * hi * gb_int8 / bw, hi / hb, load_bf16_huge, load_int8_huge,
                load_quantize_huge);
  }
  double pf_bf16 = 0, pf_int8 = 0;
  for (int r = 0; prefill_len > 0 && r < std::max(1, reps - 1); ++r) {
    pf_bf16 = std::max(pf_bf16, prefill_rate(*bf16, prefill_len));
    pf_int8 = std::max(pf_int8, prefill_rate(*int8, prefill_len));
  }
  if (prefill_len > 0)
    std::printf("prefill %d tokens: BF16 %.1f tokens/s, INT8 %.1f tokens/s (%.2fx)\n", prefill_len, pf_bf16, pf_int8,
                pf_int8 / pf_bf16);

  // ---- resident memory, one fresh process each ----
  const double rss_bf16 = child_rss_mb(model, false), rss_q = child_rss_mb(model, true), rss_pre = child_rss_mb(pre_dir, false);
  std::printf("resident memory after load + 4 decode steps: BF16 %.0f MB, INT8 quantized on load %.0f MB (%.2fx), "
              "pre-quantized INT8 %.0f MB (%.2fx)\n",
              rss_bf16, rss_q, rss_q / rss_bf16, rss_pre, rss_pre / rss_bf16);

  if (!skip_accuracy) report_accuracy(model, *bf16, positions);
  std::filesystem::remove_all(work);
  return 0;
}
