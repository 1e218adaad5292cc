// CPU element-wise, norm, RoPE, embedding and paged-attention kernels (kernels/kernels.hpp).
// Reductions use explicit 16-lane partial sums combined in a fixed order, so results do not
// depend on the vector width the compiler picks, on threads, or on batch composition.
#include <cmath>
#include <cstring>
#include <vector>

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

TROUPE_CLONES void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
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
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
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
    std::memcpy(kv.k + slot * row, k + t * row, row * sizeof(float));
    std::memcpy(kv.v + slot * row, v + t * row, row * sizeof(float));
  }
}

void paged_attention(const float* q, int64_t n_q, int64_t n_heads, int32_t start_pos,
                     const paged_kv_layer& kv, const int32_t* block_table, float scale, float* out) {
  const int64_t d = kv.head_dim;
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * d;
  const int64_t group = n_heads / kv.n_kv_heads;
  const int64_t total = n_q * n_heads;
#pragma omp parallel
  {
    std::vector<float> scores;
#pragma omp for schedule(dynamic, 1)
    for (int64_t job = 0; job < total; ++job) {
      const int64_t t = job / n_heads, h = job % n_heads, g = h / group;
      const int64_t n_keys = start_pos + t + 1;
      const float* qv = q + (t * n_heads + h) * d;
      scores.resize(n_keys);
      float mx = -INFINITY;
      for (int64_t j = 0; j < n_keys; ++j) {
        int64_t slot = static_cast<int64_t>(block_table[j / kv.block_size]) * kv.block_size +
                       j % kv.block_size;
        float s = dot_lanes(qv, kv.k + slot * row + g * d, d) * scale;
        scores[j] = s;
        mx = s > mx ? s : mx;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < n_keys; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        sum += scores[j];
      }
      float* o = out + (t * n_heads + h) * d;
      std::memset(o, 0, d * sizeof(float));
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < n_keys; ++j) {
        int64_t slot = static_cast<int64_t>(block_table[j / kv.block_size]) * kv.block_size +
                       j % kv.block_size;
        axpy(scores[j] * inv, kv.v + slot * row + g * d, o, d);
      }
    }
  }
}

}  // namespace troupe::kernels
