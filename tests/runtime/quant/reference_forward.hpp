// A plain Qwen3 (dense) forward pass for the quantization tests, with the linear layer supplied by
// the caller: it lets a test run schemes the engine does not have (llama.cpp's Q8_0, which also
// rounds activations to 8 bits per 32) on the same weights. Float32 activations, float64 sums.
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/model/checkpoint.hpp"
#include "runtime/quant/quantize.hpp"

namespace troupe::testing {

// y[rows] = x[cols] . w^T for one activation row.
using linear_fn = std::function<void(const float* x, const kernels::weight_ref& w, float* y)>;

inline void linear_f64(const float* x, const kernels::weight_ref& w, float* y) {
  for (int64_t j = 0; j < w.rows; ++j) {
    double acc = 0;
    for (int64_t k = 0; k < w.cols; ++k) acc += double{x[k]} * quant::float_weight_at(w, j, k);
    y[j] = static_cast<float>(acc);
  }
}

// Logits [ids.size(), vocab] of every position of one prompt.
inline std::vector<float> reference_logits(const checkpoint& ck, const std::vector<int32_t>& ids, const linear_fn& linear) {
  const model_config& c = ck.config;
  const int64_t T = static_cast<int64_t>(ids.size()), H = c.hidden_size, d = c.head_dim;
  const int64_t hq = c.num_attention_heads, hk = c.num_key_value_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto rmsnorm = [&](float* v, const std::vector<float>& w, int64_t n) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double{v[i]} * v[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv * w[static_cast<size_t>(i)];
  };
  auto rope = [&](float* v, int64_t pos) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = pos * std::pow(c.rope_theta, -2.0 * i / d);
      const float cs = static_cast<float>(std::cos(a)), sn = static_cast<float>(std::sin(a));
      const float x0 = v[i], x1 = v[i + d / 2];
      v[i] = x0 * cs - x1 * sn;
      v[i + d / 2] = x1 * cs + x0 * sn;
    }
  };
  std::vector<float> x(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < H; ++k) x[static_cast<size_t>(t * H + k)] = quant::float_weight_at(ck.weights.embed_tokens, ids[t], k);
  std::vector<float> h(H), q(static_cast<size_t>(T * hq * d)), kk(static_cast<size_t>(T * hk * d)),
      vv(static_cast<size_t>(T * hk * d)), att(static_cast<size_t>(hq * d)), tmp(H), g, u;
  for (const auto& lw : ck.weights.layers) {
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(x.data() + t * H, H, h.data());
      rmsnorm(h.data(), lw.input_layernorm, H);
      linear(h.data(), lw.q_proj, q.data() + t * hq * d);
      linear(h.data(), lw.k_proj, kk.data() + t * hk * d);
      linear(h.data(), lw.v_proj, vv.data() + t * hk * d);
      for (int64_t i = 0; i < hq; ++i) rmsnorm(q.data() + (t * hq + i) * d, lw.q_norm, d), rope(q.data() + (t * hq + i) * d, t);
      for (int64_t i = 0; i < hk; ++i) rmsnorm(kk.data() + (t * hk + i) * d, lw.k_norm, d), rope(kk.data() + (t * hk + i) * d, t);
    }
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < hq; ++i) {
        const int64_t kvh = i / (hq / hk);
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += double{q[static_cast<size_t>((t * hq + i) * d + e)]} * kk[static_cast<size_t>((j * hk + kvh) * d + e)];
          s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double z = 0;
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= t; ++j) o += s[static_cast<size_t>(j)] / z * vv[static_cast<size_t>((j * hk + kvh) * d + e)];
          att[static_cast<size_t>(i * d + e)] = static_cast<float>(o);
        }
      }
      linear(att.data(), lw.o_proj, tmp.data());
      for (int64_t k = 0; k < H; ++k) x[static_cast<size_t>(t * H + k)] += tmp[static_cast<size_t>(k)];
      std::copy_n(x.data() + t * H, H, h.data());
      rmsnorm(h.data(), lw.post_attention_layernorm, H);
      g.resize(static_cast<size_t>(lw.gate_proj.rows));
      u.resize(g.size());
      linear(h.data(), lw.gate_proj, g.data());
      linear(h.data(), lw.up_proj, u.data());
      for (size_t k = 0; k < g.size(); ++k) g[k] = g[k] / (1.0f + std::exp(-g[k])) * u[k];
      linear(g.data(), lw.down_proj, tmp.data());
      for (int64_t k = 0; k < H; ++k) x[static_cast<size_t>(t * H + k)] += tmp[static_cast<size_t>(k)];
    }
  }
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(x.data() + t * H, H, h.data());
    rmsnorm(h.data(), ck.weights.norm, H);
    linear(h.data(), ck.weights.lm_head, logits.data() + t * c.vocab_size);
  }
  return logits;
}

}  // namespace troupe::testing
