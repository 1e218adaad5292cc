#include "bench/common/decode_rate.hpp"

#include <sys/resource.h>

#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "bench/common/greedy.hpp"
#include "runtime/engine/parallel_runner.hpp"

namespace troupe::bench {

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

std::shared_ptr<const lora_adapter> random_lora(const model_config& cfg, int64_t rank, uint64_t seed) {
  auto a = std::make_shared<lora_adapter>();
  a->name = "random-r" + std::to_string(rank);
  a->identity = a->name;
  a->r = rank;
  a->lora_alpha = static_cast<double>(2 * rank);
  a->layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  const auto shapes = lora_target_shapes(cfg);
  for (size_t l = 0; l < shapes.size(); ++l)
    for (int t = 0; t < kLoraTargets; ++t) {
      const auto [out, in] = shapes[l][static_cast<size_t>(t)];
      if (out == 0) continue;  // a mixture-of-experts layer's MLP
      lora_pair& p = a->layers[l][static_cast<size_t>(t)];
      p.rank = rank, p.out = out, p.in = in, p.scaling = 2.0f;
      p.a.resize(static_cast<size_t>(rank * p.in));
      p.b.resize(static_cast<size_t>(p.out * rank));
      for (auto& v : p.a) v = u(rng);
      for (auto& v : p.b) v = u(rng);
      ++a->pairs;
    }
  return a;
}

decode_speed measure_decode(const checkpoint& ck, int batch, int context, int steps, int threads,
                           model_runner_options opts, dtype kv_dtype, std::shared_ptr<const lora_adapter> adapter,
                           parallel_config parallel) {
  using clk = std::chrono::steady_clock;
  const int bs = 16;
  const int per_seq = (context + steps + bs - 1) / bs;
  parallel_runner runner(ck, per_seq * batch, bs, kv_dtype, opts, parallel);
  const int32_t slot = adapter ? runner.add_adapter(std::move(adapter)) : -1;
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
  for (int s = 0; s < batch; ++s) b[s] = {s, prompts[s], 0, tables[s], logits_mode::last, slot};
  runner.step(b, res);  // prefill all contexts
  std::vector<int32_t> next(batch);
  const auto t0 = clk::now();
  const double c0 = process_cpu_seconds();
  for (int i = 0; i < steps; ++i) {
    greedy_next(res, next);
    for (int s = 0; s < batch; ++s)
      b[s] = {s, std::span<const int32_t>(&next[s], 1), context + i, tables[s], logits_mode::last, slot};
    runner.step(b, res);
  }
  const double wall = std::chrono::duration<double>(clk::now() - t0).count(), cpu = process_cpu_seconds() - c0;
  return {batch * steps / wall, batch * steps / (cpu / threads)};
}

}  // namespace troupe::bench
