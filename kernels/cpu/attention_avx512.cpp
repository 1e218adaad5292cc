// AVX-512 inner loops of paged attention (attention.hpp): 3 queries x 8 keys of scores per register
// tile (24 accumulators, reduced by matmul's tree), and up to 6 queries x 64 output floats of the
// weighted sum of values per tile, so K and V rows are read once per tile, not once per query.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {

#include "kernels/cpu/avx512_tree.hpp"
#include "kernels/cpu/vec_math_avx512.hpp"

constexpr int score_queries = 3;  // 3 x 8 accumulators + 3 q + 1 k of the 32 zmm
constexpr int score_keys = 8;
constexpr int score_ahead = 8;  // the next tile's keys
constexpr int sum_queries = 6;   // 6 x 4 accumulators + 4 v + 1 broadcast

inline __mmask16 lanes_mask(int64_t n) {  // the first min(max(n, 0), 16) lanes
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

template <int R>
void score_tile(const float* const* q, const float* const* kp, int64_t d, float scale, float* s, int64_t lds) {
  constexpr int C = score_keys;
  __m512 acc[R * C];
#pragma GCC unroll 24
  for (int i = 0; i < R * C; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = d / 16 * 16;
  for (int64_t b = 0; b < full; b += 16) {
    __m512 xv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(q[r] + b);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512 kv = _mm512_loadu_ps(kp[c] + b);
      asm("" : "+v"(kv));  // one load, not a memory operand per FMA (as in matmul_avx512.cpp)
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], kv, acc[r * C + c]);
    }
  }
  if (full < d) {  // masked tail: fma(0, 0, acc) = acc, as if zero-padded
    const __mmask16 m = lanes_mask(d - full);
    __m512 xv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(m, q[r] + full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 kv = _mm512_maskz_loadu_ps(m, kp[c] + full);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], kv, acc[r * C + c]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(s + r * lds, _mm256_mul_ps(reduce8(acc + r * C), sc));
}

#include "kernels/cpu/attention_scores.hpp"

void softmax(float* s, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + t));
  if (t < n) mx = _mm512_mask_max_ps(mx, lanes_mask(n - t), mx, _mm512_maskz_loadu_ps(lanes_mask(n - t), s + t));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (t = 0; t + 16 <= n; t += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), m));
    _mm512_storeu_ps(s + t, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (t < n) {
    const __mmask16 k = lanes_mask(n - t);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + t), m));
    _mm512_mask_storeu_ps(s + t, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  // the fixed tree: l + l+8, l + l+4, l + l+2, l + l+1
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(sum), _mm512_extractf32x8_ps(sum, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const float total = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, _MM_SHUFFLE(1, 1, 1, 1))));
  const __m512 inv = _mm512_set1_ps(1.0f / total);
  for (t = 0; t + 16 <= n; t += 16) _mm512_storeu_ps(s + t, _mm512_mul_ps(_mm512_loadu_ps(s + t), inv));
  if (t < n) _mm512_mask_storeu_ps(s + t, lanes_mask(n - t), _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes_mask(n - t), s + t), inv));
}

// out[r][p0 .. p0 + 16 W) continues (or starts, resume = false) its sums over keys [j0, j1).
template <int R, int W>
void sum_tile(const float* p, int64_t lds, int64_t j0, int64_t j1, const attn_kv& kv, int64_t p0, float* const* out,
              bool resume) {
  __mmask16 m[W];
  for (int c = 0; c < W; ++c) m[c] = lanes_mask(kv.d - p0 - 16 * c);
  __m512 acc[R * W];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c)
      acc[r * W + c] = resume ? _mm512_maskz_loadu_ps(m[c], out[r] + p0 + 16 * c) : _mm512_setzero_ps();
  if (j1 > j0) {
    kv_cursor cur(kv, j0);
    const bool strided = kv.row > kv.d;
    const int64_t ahead = 8, piece = std::min<int64_t>(16 * W, kv.d - p0);
    row_prefetcher pre(kv.v, kv, j0, strided ? j1 : j0, ahead, p0, piece);
    for (int64_t j = j0;;) {
      pre.advance();
      const float* vp = kv.v + cur.at + p0;
      __m512 vv[W];
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) vv[c] = _mm512_maskz_loadu_ps(m[c], vp + 16 * c);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m512 pb = _mm512_set1_ps(p[r * lds + j]);
#pragma GCC unroll 8
        for (int c = 0; c < W; ++c) acc[r * W + c] = _mm512_fmadd_ps(pb, vv[c], acc[r * W + c]);
      }
      if (++j == j1) break;
      cur.next();
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) _mm512_mask_storeu_ps(out[r] + p0 + 16 * c, m[c], acc[r * W + c]);
}

// Up to 2 queries (decode with 2 query heads per kv head, as Qwen3-0.6B) take 128 output floats a
// pass (2 x 8 accumulators + 8 v): a head_dim of 128 then reads each V row once, not in two halves
// of 256 bytes that are each a separate trip to memory. Same FMAs in the same order per output.
template <int R>
void sum_group(const float* p, int64_t lds, const int64_t* limit, const attn_kv& kv, float* const* out, bool resume) {
  constexpr int W = R <= 2 ? 8 : 4;
  // Every query of the group sees keys [0, limit[0]); the later ones continue alone (same order).
  for (int64_t p0 = 0; p0 < kv.d; p0 += 16 * W) {
    sum_tile<R, W>(p, lds, 0, limit[0], kv, p0, out, resume);
    for (int r = 1; r < R; ++r)
      if (limit[r] > limit[0]) sum_tile<1, W>(p + r * lds, lds, limit[0], limit[r], kv, p0, out + r, true);
  }
}

void weighted_sum(const float* p, int64_t lds, const int64_t* limit, int nq, const attn_kv& kv, float* const* out,
                  bool resume) {
  int i = 0;
  for (; i + sum_queries <= nq; i += sum_queries) sum_group<sum_queries>(p + i * lds, lds, limit + i, kv, out + i, resume);
  switch (nq - i) {
    case 5: return sum_group<5>(p + i * lds, lds, limit + i, kv, out + i, resume);
    case 4: return sum_group<4>(p + i * lds, lds, limit + i, kv, out + i, resume);
    case 3: return sum_group<3>(p + i * lds, lds, limit + i, kv, out + i, resume);
    case 2: return sum_group<2>(p + i * lds, lds, limit + i, kv, out + i, resume);
    case 1: return sum_group<1>(p + i * lds, lds, limit + i, kv, out + i, resume);
    default: return;
  }
}

}  // namespace

void silu_mul_avx512(const float* gate, const float* up, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(s, _mm512_loadu_ps(up + i)));
  }
  if (i < count) {
    const __mmask16 m = lanes_mask(count - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

const attn_backend& attn_backend_avx512() {
  static const attn_backend b{"avx512", scores, softmax, weighted_sum};
  return b;
}

}  // namespace troupe::kernels::cpu
