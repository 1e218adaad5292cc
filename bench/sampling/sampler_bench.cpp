// Cost of sampler::sample at Qwen3's vocab (151,936) for the usual parameter mixes, on two
// synthetic rows: "peaked" (LLM-like: a few strong tokens over a broad tail) and "flat" (i.i.d.
// N(0,1), the worst case for top-p: it keeps most of the vocab). Prints median and p99 in us.
// Then logprobs_of (each logprob, prompt_logprobs' every prompt token) against the scalar passes
// it replaced, measured in the same run, and against one plain read of the row.
// Usage: sampler_bench [iterations=300]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/sampling/fast_exp.hpp"
#include "runtime/sampling/logprobs.hpp"
#include "runtime/sampling/sampler.hpp"

namespace {

constexpr int kVocab = 151936;

std::vector<float> peaked_row(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> tail(-2.0f, 2.5f);
  std::vector<float> row(kVocab);
  for (float& l : row) l = tail(rng);
  std::uniform_int_distribution<int> id(0, kVocab - 1);
  for (int j = 0; j < 12; ++j) row[id(rng)] = 18.0f - 0.7f * static_cast<float>(j);
  return row;
}

std::vector<float> flat_row(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> row(kVocab);
  for (float& l : row) l = n01(rng);
  return row;
}

struct timing {
  double median_us, p99_us;
};

timing measure(const troupe::sampling_params& params, const std::vector<float>& base,
               const std::vector<int32_t>& prompt, const std::vector<int32_t>& output, int iters) {
  troupe::sampler s(params);
  std::vector<float> row(base.size());
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  volatile int32_t sink = 0;
  for (int i = 0; i < iters + 10; ++i) {
    std::copy(base.begin(), base.end(), row.begin());  // sample() edits the row in place
    const auto t0 = std::chrono::steady_clock::now();
    sink = s.sample(row, prompt, output);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 10) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  (void)sink;
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// logprobs_of as it was written before 2026-12-05 (four scalar passes: max, exp sum, top-k with a
// branch per entry; its rank pass added), the baseline the vectorised one is measured against.
double scalar_logprobs(const std::vector<float>& logits, int32_t chosen, int32_t top_k) {
  const auto n = static_cast<int64_t>(logits.size());
  float m = -INFINITY;
  for (float x : logits) m = std::max(m, x);
  double sum = 0;
  for (int64_t c = 0; c < n; c += 1024) {
    float part = 0;
    for (int64_t i = c; i < std::min(n, c + 1024); ++i)
      part += troupe::sampling_detail::fast_exp_nonpositive(logits[static_cast<size_t>(i)] - m);
    sum += part;
  }
  const double log_z = static_cast<double>(m) + std::log(sum);
  int64_t rank = 0;
  for (float x : logits) rank += x >= logits[static_cast<size_t>(chosen)];
  std::vector<int32_t> best;
  float threshold = -INFINITY;
  auto better = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  for (int32_t i = 0; i < n && top_k > 0; ++i) {
    const float x = logits[static_cast<size_t>(i)];
    if (static_cast<int32_t>(best.size()) == top_k && !(x > threshold)) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (static_cast<int32_t>(best.size()) > top_k) best.pop_back();
    if (static_cast<int32_t>(best.size()) == top_k) threshold = logits[static_cast<size_t>(best.back())];
  }
  return logits[static_cast<size_t>(chosen)] - log_z + static_cast<double>(rank + static_cast<int64_t>(best.size()));
}

template <class F>
double median_us(F f, int iters) {
  std::vector<double> us;
  volatile double sink = 0;
  for (int i = 0; i < iters + 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + f(i);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 10) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 300;
  struct config {
    const char* name;
    troupe::sampling_params params;
    bool penalties;
  };
  auto make = [](float t, float top_p, int top_k, float min_p) {
    troupe::sampling_params p;
    p.temperature = t;
    p.top_p = top_p;
    p.top_k = top_k;
    p.min_p = min_p;
    p.has_seed = true;
    p.seed = 7;
    return p;
  };
  troupe::sampling_params pen = make(0.6f, 0.95f, 20, 0.0f);
  pen.repetition_penalty = 1.1f;
  pen.presence_penalty = 0.5f;
  pen.frequency_penalty = 0.5f;
  const std::vector<config> configs = {
      {"greedy (T=0)", make(0.0f, 1.0f, 0, 0.0f), false},
      {"T=1, no filter", make(1.0f, 1.0f, 0, 0.0f), false},
      {"T=0.7 top_p=0.95", make(0.7f, 0.95f, 0, 0.0f), false},
      {"T=0.7 min_p=0.05", make(0.7f, 1.0f, 0, 0.05f), false},
      {"T=0.6 top_k=20 top_p=0.95 (Qwen3)", make(0.6f, 0.95f, 20, 0.0f), false},
      {"T=0.7 top_k=1000 top_p=0.9", make(0.7f, 0.9f, 1000, 0.0f), false},
      {"T=0.7 top_k=10000 top_p=0.9", make(0.7f, 0.9f, 10000, 0.0f), false},
      {"Qwen3 + penalties, 4096+1024 ids", pen, true},
  };
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::vector<int32_t> prompt(4096), output(1024);
  for (auto& t : prompt) t = id(rng);
  for (auto& t : output) t = id(rng);
  const std::vector<int32_t> none;

  const auto peaked = peaked_row(1), flat = flat_row(2);
  std::printf("sampler::sample, vocab %d, %d iterations, median / p99 in us\n", kVocab, iters);
  std::printf("%-38s %18s %18s\n", "config", "peaked row", "flat row");
  for (const config& c : configs) {
    const auto& pr = c.penalties ? prompt : none;
    const auto& out = c.penalties ? output : none;
    const timing a = measure(c.params, peaked, pr, out, iters);
    const timing b = measure(c.params, flat, pr, out, iters);
    std::printf("%-38s %8.1f / %7.1f %8.1f / %7.1f\n", c.name, a.median_us, a.p99_us,
                b.median_us, b.p99_us);
  }

  // One plain read of the row (a 16-lane maximum): what any pass over it costs at least.
  const double read_us = median_us(
      [&](int) {
        float mx[16];
        std::fill(mx, mx + 16, -INFINITY);
        for (size_t i = 0; i + 16 <= flat.size(); i += 16)
          for (int l = 0; l < 16; ++l) mx[l] = std::max(mx[l], flat[i + static_cast<size_t>(l)]);
        return static_cast<double>(*std::max_element(mx, mx + 16));
      },
      iters);
  std::printf("\nlogprobs_of, median us a row (one plain read of the row: %.1f us)\n", read_us);
  std::printf("%-12s %10s %10s %10s %12s\n", "top_k", "peaked", "flat", "scalar", "scalar/new");
  for (int32_t k : {0, 5, 20}) {
    const double a = median_us([&](int i) { return troupe::logprobs_of(peaked, (i * 7919) % kVocab, k).logprob; }, iters);
    const double b = median_us([&](int i) { return troupe::logprobs_of(flat, (i * 7919) % kVocab, k).logprob; }, iters);
    const double o = median_us([&](int i) { return scalar_logprobs(flat, (i * 7919) % kVocab, k); }, iters);
    std::printf("%-12d %10.1f %10.1f %10.1f %11.2fx\n", k, a, b, o, o / b);
  }
  return 0;
}
