// Decode beside busy processes: what `--threads` buys on a shared machine. For 0..N threads that
// spin on the cores (stand-ins for other busy processes: the kernel schedules them alike), decode
// at batch 1 and 8 with the step's OpenMP team at each thread count asked for, in one run, as
// tokens/s and as a ratio to the quiet machine with every core.
//
// Why it matters: an OpenMP team waits at the end of each parallel region for its slowest thread,
// and a step opens a few per layer; a team thread that loses its core to another process for a
// time slice (milliseconds) holds up every region it is part of. Fewer engine threads than free
// cores keep the team on cores nobody takes away.
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "bench/common/decode_rate.hpp"
#include "runtime/engine/omp_threads.hpp"
#include "runtime/model/checkpoint.hpp"

using namespace troupe;

namespace {

// `n` threads spinning until destroyed.
class busy_threads {
 public:
  explicit busy_threads(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
  }
  ~busy_threads() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Troupe decode beside busy threads (--threads on a shared machine)"};
  std::string model;
  const int cores = omp_threads_now();
  std::vector<int> busy{0, 1, 2, 3}, threads{1, cores}, batches{1, 8};
  int steps = 24, context = 64;
  app.add_option("--model", model, "checkpoint directory (e.g. made by troupe make-checkpoint --preset qwen3-0.6b)")->required();
  app.add_option("--busy", busy, "counts of spinning threads beside the engine, each measured")->delimiter(',');
  app.add_option("--threads", threads, "engine thread counts, each measured (default 1 and every core)")->delimiter(',');
  app.add_option("--batches", batches, "decode batch sizes")->delimiter(',');
  app.add_option("--steps", steps, "decode steps timed per figure");
  app.add_option("--context", context, "tokens each sequence already holds");
  CLI11_PARSE(app, argc, argv);

  auto ck = load_checkpoint(model);
  std::printf("model %s, %d cores (OpenMP), %d decode steps after %d tokens\n", model.c_str(), cores, steps, context);
  for (const int batch : batches) {
    // The quiet machine on every core: the ratios' base.
    const double base = bench::measure_decode(*ck, batch, context, steps, cores, {}, dtype::f32, nullptr, {1, false, cores}).wall;
    std::printf("\nbatch %d: quiet, %d threads: %.1f tokens/s (the base)\n", batch, cores, base);
    std::printf("%6s", "busy");
    for (const int t : threads) std::printf("  %12s %2d", "threads", t);
    std::printf("\n");
    for (const int b : busy) {
      busy_threads spin(b);
      std::printf("%6d", b);
      for (const int t : threads) {
        const double rate = bench::measure_decode(*ck, batch, context, steps, t, {}, dtype::f32, nullptr, {1, false, t}).wall;
        std::printf("  %6.1f (%4.2fx)", rate, rate / base);
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
}
