// CPU element-wise, norm, RoPE, embedding and paged-attention kernels (kernels/kernels.hpp).
// Reductions use explicit 16-lane partial sums combined in a fixed order, so results do not
// depend on the vector width the compiler picks, on threads, or on batch composition.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/kv_quant.hpp"
#include "kernels/cpu/vec_math.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

#define TROUPE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace troupe::kernels {
namespace {

constexpr int kLanes = 16;

// Dot product with kLanes partial sums and a fixed pairwise combine.
TROUPE_CLONES float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

TROUPE_CLONES void widen_row(const void* src, dtype t, int64_t n, float* out) {
  switch (t) {
    case dtype::f32: std::memcpy(out, src, n * sizeof(float)); return;
    case dtype::bf16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(s[i]);
      return;
    }
    case dtype::f16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(s[i]);
      return;
    }
    default: throw_error(errc::unsupported, "embedding: unsupported table dtype " + std::string(to_string(t)));
  }
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float ss = dot_lanes(xr, xr, dim);
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * weight[i];
  }
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq) {
  const int64_t half = head_dim / 2;
  std::vector<float> cs(half), sn(half);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      // NOTE: angle in double then rounded: float32 pos*inv_freq loses digits at long context.
      double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
      cs[i] = static_cast<float>(std::cos(angle));
      sn[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = b * cs[i] + a * sn[i];
      }
    }
  }
}

TROUPE_CLONES void silu_mul(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + cpu::exp_approx(-g)) * up[i];
  }
}

void embedding(const weight_ref& table, const int32_t* ids, int64_t n, float* out) {
  const size_t row_bytes = static_cast<size_t>(table.cols) * dtype_size(table.type);
  for (int64_t r = 0; r < n; ++r) {
    TROUPE_ASSERT(ids[r] >= 0 && ids[r] < table.rows);
    widen_row(static_cast<const uint8_t*>(table.data) + row_bytes * ids[r], table.type, table.cols,
              out + r * table.cols);
  }
}

void kv_write(const paged_kv_layer& kv, const int32_t* block_table, int32_t start_pos, int64_t n,
              const float* k, const float* v) {
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  for (int64_t t = 0; t < n; ++t) {
    int64_t pos = start_pos + t;
    int64_t block = block_table[pos / kv.block_size];
    int64_t slot = block * kv.block_size + pos % kv.block_size;
    if (kv.type != dtype::f32) {  // quantized pool: each (token, head) row with its own scale
      for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t at = slot * kv.n_kv_heads + h;
        kv.k_scales[at] = cpu::quantize_kv_row(k + t * row + h * kv.head_dim, kv.head_dim, kv.type, kv.k_codes + at * kv.head_dim);
        kv.v_scales[at] = cpu::quantize_kv_row(v + t * row + h * kv.head_dim, kv.head_dim, kv.type, kv.v_codes + at * kv.head_dim);
      }
      continue;
    }
    std::memcpy(kv.k + slot * row, k + t * row, row * sizeof(float));
    std::memcpy(kv.v + slot * row, v + t * row, row * sizeof(float));
  }
}

namespace {

inline const float* kv_row(const float* base, const paged_kv_layer& kv, const int32_t* table, int64_t pos,
                           int64_t row, int64_t offset) {
  const int64_t slot = static_cast<int64_t>(table[pos / kv.block_size]) * kv.block_size + pos % kv.block_size;
  return base + slot * row + offset;
}

// One query head over keys 0..n_keys-1. Scores come four keys at a time (independent
// accumulators keep the FMA pipes busy) but each score is the same lane-wise dot product as
// dot_lanes, so results do not depend on how keys are grouped.
TROUPE_CLONES void attend_one(const float* qv, int64_t n_keys, const paged_kv_layer& kv, const int32_t* table,
                              int64_t g, float scale, float* scores, float* o) {
  const int64_t d = kv.head_dim, row = static_cast<int64_t>(kv.n_kv_heads) * d;
  auto reduce = [](float* acc) {
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    return acc[0];
  };
  int64_t j = 0;
  for (; j + 4 <= n_keys; j += 4) {
    const float* k0 = kv_row(kv.k, kv, table, j, row, g * d);
    const float* k1 = kv_row(kv.k, kv, table, j + 1, row, g * d);
    const float* k2 = kv_row(kv.k, kv, table, j + 2, row, g * d);
    const float* k3 = kv_row(kv.k, kv, table, j + 3, row, g * d);
    float a0[kLanes] = {}, a1[kLanes] = {}, a2[kLanes] = {}, a3[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= d; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        a0[l] += qv[i + l] * k0[i + l];
        a1[l] += qv[i + l] * k1[i + l];
        a2[l] += qv[i + l] * k2[i + l];
        a3[l] += qv[i + l] * k3[i + l];
      }
    for (int l = 0; i + l < d; ++l) {
      a0[l] += qv[i + l] * k0[i + l];
      a1[l] += qv[i + l] * k1[i + l];
      a2[l] += qv[i + l] * k2[i + l];
      a3[l] += qv[i + l] * k3[i + l];
    }
    scores[j] = reduce(a0) * scale;
    scores[j + 1] = reduce(a1) * scale;
    scores[j + 2] = reduce(a2) * scale;
    scores[j + 3] = reduce(a3) * scale;
  }
  for (; j < n_keys; ++j) {
    const float* k0 = kv_row(kv.k, kv, table, j, row, g * d);
    float a0[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= d; i += kLanes)
      for (int l = 0; l < kLanes; ++l) a0[l] += qv[i + l] * k0[i + l];
    for (int l = 0; i + l < d; ++l) a0[l] += qv[i + l] * k0[i + l];
    scores[j] = reduce(a0) * scale;
  }
  float mx = -INFINITY;
  for (int64_t t = 0; t < n_keys; ++t) mx = scores[t] > mx ? scores[t] : mx;
  float lanes[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= n_keys; t += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      scores[t + l] = cpu::exp_approx(scores[t + l] - mx);
      lanes[l] += scores[t + l];
    }
  for (int l = 0; t + l < n_keys; ++l) {
    scores[t + l] = cpu::exp_approx(scores[t + l] - mx);
    lanes[l] += scores[t + l];
  }
  const float inv = 1.0f / reduce(lanes);
  for (int64_t i = 0; i < d; ++i) o[i] = 0.0f;
  for (int64_t k = 0; k < n_keys; ++k) {
    const float p = scores[k] * inv;
    const float* vr = kv_row(kv.v, kv, table, k, row, g * d);
    for (int64_t i = 0; i < d; ++i) o[i] += p * vr[i];
  }
}

}  // namespace

void paged_attention(const float* q, int64_t n_q, int64_t n_heads, int32_t start_pos,
                     const paged_kv_layer& kv, const int32_t* block_table, float scale, float* out) {
  if (kv.type != dtype::f32) {
    // Quantized pool: dequantise the keys this chunk sees into a float pool laid out position by
    // position, then run the float attention on it unchanged (so the result is exactly the float
    // attention on the stored values).
    struct scratch {
      std::vector<float> k, v;
      std::vector<int32_t> table;
    };
    thread_local scratch s;
    const int64_t n_keys = start_pos + n_q, row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
    const int64_t blocks = (n_keys + kv.block_size - 1) / kv.block_size;
    s.k.resize(static_cast<size_t>(blocks * kv.block_size * row));
    s.v.resize(s.k.size());
    s.table.resize(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) s.table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    // NOTE: `s` is thread_local: the OpenMP workers must write through these pointers, not their
    // own (empty) `s`.
    float* const kd = s.k.data();
    float* const vd = s.v.data();
#pragma omp parallel for schedule(static) if (n_keys * row >= (int64_t{1} << 15))
    for (int64_t p = 0; p < n_keys; ++p) {
      const int64_t slot = static_cast<int64_t>(block_table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
      for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t at = slot * kv.n_kv_heads + h;
        cpu::dequantize_kv_row(kv.k_codes + at * kv.head_dim, kv.k_scales[at], kv.head_dim, kv.type, kd + p * row + h * kv.head_dim);
        cpu::dequantize_kv_row(kv.v_codes + at * kv.head_dim, kv.v_scales[at], kv.head_dim, kv.type, vd + p * row + h * kv.head_dim);
      }
    }
    paged_kv_layer f{s.k.data(), s.v.data(), kv.block_size, kv.n_kv_heads, kv.head_dim};
    return paged_attention(q, n_q, n_heads, start_pos, f, s.table.data(), scale, out);
  }
  const int64_t d = kv.head_dim;
  const int64_t group = n_heads / kv.n_kv_heads;
  const int64_t total = n_q * n_heads;
#pragma omp parallel if (total > 1)
  {
    std::vector<float> scores;
    // Later queries see more keys: hand out the longest jobs first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t job = total - 1; job >= 0; --job) {
      const int64_t t = job / n_heads, h = job % n_heads;
      const int64_t n_keys = start_pos + t + 1;
      scores.resize(n_keys);
      attend_one(q + (t * n_heads + h) * d, n_keys, kv, block_table, h / group, scale, scores.data(),
                 out + (t * n_heads + h) * d);
    }
  }
}

}  // namespace troupe::kernels
