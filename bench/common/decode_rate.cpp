#include "bench/common/decode_rate.hpp"

#include <sys/resource.h>

#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "bench/common/greedy.hpp"

namespace troupe::bench {

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

decode_speed measure_decode(const checkpoint& ck, int batch, int context, int steps, int threads,
                           model_runner_options opts, dtype kv_dtype) {
  using clk = std::chrono::steady_clock;
  const int bs = 16;
  const int per_seq = (context + steps + bs - 1) / bs;
  kv_cache kv(ck.config, per_seq * batch, bs, kv_dtype);
  model_runner runner(ck, kv, opts);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(ck.config.vocab_size - 1));
  std::vector<std::vector<int32_t>> tables(batch), prompts(batch);
  for (int s = 0; s < batch; ++s) {
    tables[s].resize(per_seq);
    std::iota(tables[s].begin(), tables[s].end(), s * per_seq);
    prompts[s].resize(context);
    for (auto& t : prompts[s]) t = tok(rng);
  }
  step_result res;
  std::vector<step_sequence> b(batch);
  for (int s = 0; s < batch; ++s) b[s] = {s, prompts[s], 0, tables[s], logits_mode::last};
  runner.step(b, res);  // prefill all contexts
  std::vector<int32_t> next(batch);
  const auto t0 = clk::now();
  const double c0 = process_cpu_seconds();
  for (int i = 0; i < steps; ++i) {
    greedy_next(res, next);
    for (int s = 0; s < batch; ++s)
      b[s] = {s, std::span<const int32_t>(&next[s], 1), context + i, tables[s], logits_mode::last};
    runner.step(b, res);
  }
  const double wall = std::chrono::duration<double>(clk::now() - t0).count(), cpu = process_cpu_seconds() - c0;
  return {batch * steps / wall, batch * steps / (cpu / threads)};
}

}  // namespace troupe::bench
