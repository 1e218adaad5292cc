// The scheme's own error, measured against a bound: on a small random Qwen3 (random BF16 weights
// as make-checkpoint writes them, 4 prompts x 64 random ids), Troupe's INT8 must be at least as
// accurate as llama.cpp's Q8_0 (one f16 scale per 32 values, weights and activations alike) in
// mean KL divergence of the next-token distributions from the full-precision run and in top-1
// agreement. Q8_0 runs in a reference forward pass that rounds as llama.cpp does.
// docs/quantization.md has the same measurement on the Qwen3-0.6B shape (bench/quant).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <map>

#include "kernels/cpu/matmul_quant.hpp"
#include "runtime/quant/divergence.hpp"
#include "runtime/quant/load.hpp"
#include "tests/runtime/quant/reference_forward.hpp"
#include "tests/runtime/quant/test_util.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr int kPrompts = 4, kPositions = 64;
// The random model's logits are nearly uniform (entropy ~ log vocab): scaling the final norm makes
// them as peaked as a trained model's, so that KL and top-1 say something.
constexpr float kLogitScale = 8.0f;

// llama.cpp's Q8_0 (quantize_row_q8_0_ref, ggml_vec_dot_q8_0_q8_0): per 32 values d = amax / 127
// stored in f16, q = round(x / d); weights AND activations, dot = sum over blocks d_w d_x sum q q.
struct q8_0_rows {
  std::vector<int8_t> q;
  std::vector<float> d;
};

q8_0_rows to_q8_0(const float* v, int64_t rows, int64_t cols) {
  q8_0_rows out;
  const int64_t blocks = (cols + 31) / 32;
  out.q.assign(static_cast<size_t>(rows * blocks * 32), 0);
  out.d.resize(static_cast<size_t>(rows * blocks));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * 32, c1 = std::min(cols, c0 + 32);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[r * cols + c]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      out.d[static_cast<size_t>(r * blocks + b)] = f16_to_f32(f32_to_f16(d));
      for (int64_t c = c0; c < c1; ++c)
        out.q[static_cast<size_t>((r * blocks) * 32 + c)] = static_cast<int8_t>(std::round(v[r * cols + c] * id));
    }
  return out;
}

struct q8_0_linear {
  std::map<const void*, q8_0_rows> weights;
  void operator()(const float* x, const kernels::weight_ref& w, float* y) {
    auto it = weights.find(w.data);
    if (it == weights.end()) {
      std::vector<float> f(static_cast<size_t>(w.rows * w.cols));
      for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t c = 0; c < w.cols; ++c) f[static_cast<size_t>(r * w.cols + c)] = quant::float_weight_at(w, r, c);
      it = weights.emplace(w.data, to_q8_0(f.data(), w.rows, w.cols)).first;
    }
    const q8_0_rows xq = to_q8_0(x, 1, w.cols);
    const int64_t blocks = (w.cols + 31) / 32;
    for (int64_t j = 0; j < w.rows; ++j) {
      double sum = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t si = 0;
        for (int64_t c = 0; c < 32; ++c) si += int32_t{it->second.q[static_cast<size_t>((j * blocks + b) * 32 + c)]} * xq.q[static_cast<size_t>(b * 32 + c)];
        sum += double{it->second.d[static_cast<size_t>(j * blocks + b)]} * xq.d[static_cast<size_t>(b)] * si;
      }
      y[j] = static_cast<float>(sum);
    }
  }
};

// The INT8 model's linears in float64: x times the dequantised weights (code x scale). With
// `act_block` >= 0 the activations are first rounded to INT8 as W8A8 would, one scale per
// `act_block` values (0: one per token, vLLM's per-token dynamic scales), so that rounding is all
// that differs from W8A16 (`act_block` < 0). Float weights (embeddings) take the plain product.
struct int8_linear {
  int64_t act_block = -1;
  void operator()(const float* x, const kernels::weight_ref& w, float* y) const {
    if (w.type != dtype::i8) return linear_f64(x, w, y);
    std::vector<double> a(x, x + w.cols);
    const int64_t b = act_block > 0 ? act_block : w.cols;
    for (int64_t c0 = 0; act_block >= 0 && c0 < w.cols; c0 += b) {
      const int64_t c1 = std::min(w.cols, c0 + b);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[c]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      for (int64_t c = c0; c < c1; ++c) a[static_cast<size_t>(c)] = double{d} * std::round(x[c] * id);
    }
    const auto* codes = static_cast<const int8_t*>(w.data);
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k)
        acc += a[static_cast<size_t>(k)] * (static_cast<double>(codes[j * w.cols + k]) * kernels::cpu::scale_of(w, j, k));
      y[j] = static_cast<float>(acc);
    }
  }
};

std::vector<int32_t> prompt(int p, int64_t vocab) { return random_ids(kPositions, vocab, 100 + static_cast<uint64_t>(p)); }

std::vector<float> engine_logits(checkpoint& ck) {
  for (auto& v : ck.weights.norm) v *= kLogitScale;
  generator gen(ck);
  std::vector<float> all;
  for (int p = 0; p < kPrompts; ++p) {
    auto l = gen.prompt_logits(prompt(p, ck.config.vocab_size));
    all.insert(all.end(), l.begin(), l.end());
  }
  for (auto& v : ck.weights.norm) v /= kLogitScale;
  return all;
}

std::vector<float> reference_logits_all(checkpoint& ck, const linear_fn& linear) {
  for (auto& v : ck.weights.norm) v *= kLogitScale;
  std::vector<float> all;
  for (int p = 0; p < kPrompts; ++p) {
    auto l = reference_logits(ck, prompt(p, ck.config.vocab_size), linear);
    all.insert(all.end(), l.begin(), l.end());
  }
  for (auto& v : ck.weights.norm) v /= kLogitScale;
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(int8_is_at_least_as_accurate_as_q8_0) {
  temp_dir dir("accuracy");
  auto full = load_checkpoint(write_accuracy_model(dir));
  const auto ref = engine_logits(*full);
  const int64_t vocab = full->config.vocab_size;

  // The reference forward pass agrees with the engine (so its Q8_0 run is comparable).
  const auto self = quant::compare_logits(ref, reference_logits_all(*full, linear_f64), vocab);
  BOOST_TEST(self.mean_kl < 1e-8);
  BOOST_TEST(self.top1_agreement == 1.0);

  q8_0_linear q8;
  const auto q8_0 = quant::compare_logits(ref, reference_logits_all(*full, std::ref(q8)), vocab);
  quant::load_options o;
  o.quantization = quant::method::int8;
  const auto int8 = quant::compare_logits(ref, engine_logits(*quant::load_model(dir.str("model"), o)), vocab);
  o.group_size = 0;
  const auto channel = quant::compare_logits(ref, engine_logits(*quant::load_model(dir.str("model"), o)), vocab);

  BOOST_TEST_MESSAGE("mean KL / top-1 over " << int8.rows << " positions: int8 group 128 " << int8.mean_kl << " / "
                                             << int8.top1_agreement << ", per channel " << channel.mean_kl << " / "
                                             << channel.top1_agreement << ", llama.cpp Q8_0 " << q8_0.mean_kl << " / "
                                             << q8_0.top1_agreement);
  BOOST_TEST(int8.rows == kPrompts * kPositions);
  BOOST_TEST(int8.mean_kl <= q8_0.mean_kl);
  BOOST_TEST(int8.top1_agreement >= q8_0.top1_agreement);
  // Finer groups must pay off against one scale per output channel (else the scales are waste).
  BOOST_TEST(int8.mean_kl < channel.mean_kl);
}

// Prefill "may use W8A8 where faster and within accuracy": the measurement behind keeping W8A16
// for prefill (docs/quantization.md). The INT8 model's prompts run with activations rounded to INT8
// per token (vLLM's dynamic per-token scales) and per 128 values; within accuracy means at least as
// accurate as Q8_0, the bound above. Both miss it while W8A16 meets it, so prefill keeps W8A16;
// should a change of scheme or model make W8A8 meet it, this fails and the choice is to be redone.
BOOST_AUTO_TEST_CASE(w8a8_prefill_misses_the_q8_0_bound_that_w8a16_meets) {
  temp_dir dir("accuracy_w8a8");
  auto full = load_checkpoint(write_accuracy_model(dir));
  const auto ref = engine_logits(*full);
  const int64_t vocab = full->config.vocab_size;
  quant::load_options o;
  o.quantization = quant::method::int8;
  auto q = quant::load_model(dir.str("model"), o);
  const auto engine = quant::compare_logits(ref, engine_logits(*q), vocab);
  const auto w8a16 = quant::compare_logits(ref, reference_logits_all(*q, int8_linear{-1}), vocab);
  const auto per_token = quant::compare_logits(ref, reference_logits_all(*q, int8_linear{0}), vocab);
  const auto per_128 = quant::compare_logits(ref, reference_logits_all(*q, int8_linear{128}), vocab);
  q8_0_linear q8;
  const auto q8_0 = quant::compare_logits(ref, reference_logits_all(*full, std::ref(q8)), vocab);
  BOOST_TEST_MESSAGE("mean KL / top-1: W8A16 " << w8a16.mean_kl << " / " << w8a16.top1_agreement << ", W8A8 per token "
                                               << per_token.mean_kl << " / " << per_token.top1_agreement
                                               << ", W8A8 per 128 " << per_128.mean_kl << " / " << per_128.top1_agreement
                                               << ", Q8_0 " << q8_0.mean_kl << " / " << q8_0.top1_agreement);
  // The float64 W8A16 reference is the engine's INT8 path up to float32 noise.
  BOOST_TEST(std::fabs(w8a16.mean_kl - engine.mean_kl) <= 0.02 * engine.mean_kl);
  BOOST_TEST(w8a16.mean_kl <= q8_0.mean_kl);
  BOOST_TEST(per_token.mean_kl > q8_0.mean_kl);
  BOOST_TEST(per_128.mean_kl > q8_0.mean_kl);
}
