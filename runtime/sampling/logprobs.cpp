#include "runtime/sampling/logprobs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/sampling/row.hpp"

namespace troupe {

namespace {

// The largest of x[0..n), in 16 lanes (one chain of max would take several times as long).
float lane_max(const float* x, int64_t n) {
  std::array<float, 16> mx;
  mx.fill(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) mx[static_cast<size_t>(l)] = std::max(mx[static_cast<size_t>(l)], x[i + l]);
  float m = *std::max_element(mx.begin(), mx.end());
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

}  // namespace

token_logprobs logprobs_of(std::span<const float> logits, int32_t chosen, int32_t top_k) {
  const auto n = static_cast<int64_t>(logits.size());
  if (chosen < 0 || chosen >= n)
    throw_error(errc::invalid_argument, "logprobs: token " + std::to_string(chosen) + " is outside the row of " +
                                            std::to_string(n));
  if (top_k < 0 || top_k > max_top_logprobs)
    throw_error(errc::invalid_argument, "logprobs: top_k " + std::to_string(top_k) + " is outside [0, " +
                                            std::to_string(max_top_logprobs) + "]");
  // log Z = m + log sum exp(x - m). Two passes over the row, both vectorised: the maximum (16
  // lanes), then per 1024-entry chunk while it sits in L1: its exponentials by the sampler's
  // exp_row (AVX2 where the CPU has it; bit-identical to its baseline) summed in 8 float lanes
  // (the chunks in double, so the row's length adds no rounding worth a digit), the chosen
  // token's rank, and the top-k. (As four scalar passes it took ~0.4 ms a 151,936-entry row, which
  // a long prompt's prompt_logprobs paid per token.)
  const float* x = logits.data();
  const float m = lane_max(x, n);

  token_logprobs out;
  const float x_chosen = x[chosen];
  out.id = chosen;
  int64_t at_least = 0;  // vLLM's rank: ties count as at least as likely
  // The k best (k <= 20) kept sorted: ids arrive in increasing order, so a later logit equal to
  // the k-th best never beats it; once the list is full only a strictly larger logit can enter,
  // and a block of 64 whose maximum is not larger is skipped whole (after the first blocks,
  // nearly all of them).
  auto better = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(top_k) + 1);
  float threshold = -INFINITY;
  auto take_best = [&](int64_t from, int64_t to) {
    constexpr int64_t block = 64;
    for (int64_t b = from; b < to; b += block) {
      const int64_t end = std::min(to, b + block);
      if (static_cast<int32_t>(best.size()) == top_k && !(lane_max(x + b, end - b) > threshold)) continue;
      for (int64_t k = b; k < end; ++k) {
        const auto id = static_cast<int32_t>(k);
        if (static_cast<int32_t>(best.size()) == top_k && !(x[k] > threshold)) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
        if (static_cast<int32_t>(best.size()) > top_k) best.pop_back();
        if (static_cast<int32_t>(best.size()) == top_k) threshold = x[best.back()];
      }
    }
  };
  double sum = 0;
  constexpr int64_t chunk = 1024;
  alignas(32) std::array<float, chunk> e;
  for (int64_t c = 0; c < n; c += chunk) {
    const int64_t len = std::min(chunk, n - c);
    sampling_detail::exp_row(x + c, m, e.data(), len);
    std::array<float, 8> lanes{};
    int64_t j = 0;
    for (; j + 8 <= len; j += 8)
      for (int l = 0; l < 8; ++l) lanes[static_cast<size_t>(l)] += e[static_cast<size_t>(j + l)];
    float part = 0;
    for (float v : lanes) part += v;
    for (; j < len; ++j) part += e[static_cast<size_t>(j)];
    sum += part;
    int32_t ge = 0;
    for (int64_t k = c; k < c + len; ++k) ge += x[k] >= x_chosen;
    at_least += ge;
    if (top_k > 0) take_best(c, c + len);
  }
  const double log_z = static_cast<double>(m) + std::log(sum);
  out.logprob = static_cast<double>(x_chosen) - log_z;
  out.rank = static_cast<int32_t>(at_least);
  for (int32_t id : best) out.top.emplace_back(id, static_cast<double>(x[id]) - log_z);
  return out;
}

}  // namespace troupe
