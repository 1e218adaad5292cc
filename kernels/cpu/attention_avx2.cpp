// AVX2 inner loops of paged attention (attention.hpp), SiLU and FP8 KV rows, for CPUs without
// AVX-512 (FP8 KV rows on AVX-512 CPUs too). The 16 lanes of a dot product live in two ymm (lanes
// 0-7, 8-15), as in matmul_avx2.cpp, so results match the AVX-512 and portable back-ends bit for
// bit. With 16 registers instead of 32 the tiles are smaller: 3 queries x 4 keys of scores, one
// half of the 16 lanes at a time (12 accumulators), and 3 queries x 32 output floats of the
// weighted sum. Before this file AVX2 machines ran the portable loops: 40% of a 512-token prefill.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/kv_quant.hpp"  // before the target pragma: its inline functions stay baseline

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {  // internal linkage: no AVX2 code can leak into other units through COMDAT folding

#include "kernels/cpu/avx2_tree.hpp"
#include "kernels/cpu/vec_math_avx2.hpp"

constexpr int score_queries = 3;  // 3 x 4 accumulators + 3 q + 1 k of the 16 ymm
constexpr int score_keys = 4;
constexpr int score_ahead = 8;  // keys whose rows are prefetched ahead (2 tiles)

// The first min(max(n, 0), 8) lanes, for maskload / maskstore.
inline __m256i lanes_mask(int64_t n) {
  const int64_t c = std::clamp<int64_t>(n, 0, 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(c)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// One half of a score tile's 16-lane sums: acc[r * C + c][l] = sum over blocks b of q[r][16b + 8h + l] *
// k[c][16b + 8h + l] (h = 0: lanes 0-7, h = 1: lanes 8-15). The halves are independent sums, so
// the tile runs them one after the other: 12 accumulators + 3 q + 1 k fit the 16 ymm with 3
// queries x 4 keys (7 loads per 12 FMAs; both halves live allowed 3 x 2 at 10 per 12).
template <int R, int C>
void score_half(const float* const* q_, const float* const* kp_, int64_t d, int h, __m256* out) {
  // Locals, so that the compiler keeps the sums in registers and the row pointers out of the
  // loop: through `out` and q_ / kp_ it stored every sum and reloaded every pointer per block.
  const float* q[R];
  const float* kp[C];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) q[r] = q_[r];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) kp[c] = kp_[c];
  __m256 acc[R * C];
#pragma GCC unroll 12
  for (int i = 0; i < R * C; ++i) acc[i] = _mm256_setzero_ps();
  const int64_t full = d / 16 * 16;
  for (int64_t b = 8 * h; b < full; b += 16) {
    __m256 xv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(q[r] + b);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m256 kv = _mm256_loadu_ps(kp[c] + b);
      asm("" : "+x"(kv));  // one load, not a memory operand per FMA (as in matmul_avx2.cpp)
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm256_fmadd_ps(xv[r], kv, acc[r * C + c]);
    }
  }
  if (full < d) {  // masked tail: fma(0, 0, acc) = acc, as if zero-padded
    const __m256i m = lanes_mask(d - full - 8 * h);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256 kv = _mm256_maskload_ps(kp[c] + full + 8 * h, m);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r)
        acc[r * C + c] = _mm256_fmadd_ps(_mm256_maskload_ps(q[r] + full + 8 * h, m), kv, acc[r * C + c]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < R * C; ++i) out[i] = acc[i];
}

// tree16 (avx2_tree.hpp) of four keys' lanes at once, in its order: l + l+8, l + l+4, l + l+2,
// l + l+1 per key (float addition commutes, so the operands' order within each add is free).
inline __m128 tree16x4(const __m256* lo, const __m256* hi) {
  const __m256 a = _mm256_add_ps(lo[0], hi[0]), b = _mm256_add_ps(lo[1], hi[1]);
  const __m256 c = _mm256_add_ps(lo[2], hi[2]), e = _mm256_add_ps(lo[3], hi[3]);
  // [a0+a4 .. a3+a7 | b0+b4 .. b3+b7] and the same for c, e
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 ce = _mm256_add_ps(_mm256_permute2f128_ps(c, e, 0x20), _mm256_permute2f128_ps(c, e, 0x31));
  // [a'0+a'2, a'1+a'3, c'0+c'2, c'1+c'3 | b'.., e'..]
  const __m256 z = _mm256_add_ps(_mm256_shuffle_ps(ab, ce, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, ce, _MM_SHUFFLE(3, 2, 3, 2)));
  // [a, c, a, c | b, e, b, e]
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(z, z, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(z, z, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));  // [a, b, c, e]
}

template <int R>
void score_tile(const float* const* q, const float* const* kp, int64_t d, float scale, float* s, int64_t lds) {
  constexpr int C = score_keys;
  static_assert(C == 4, "tree16x4 reduces four keys");
  __m256 lo[R * C], hi[R * C];
  score_half<R, C>(q, kp, d, 0, lo);
  score_half<R, C>(q, kp, d, 1, hi);
  const __m128 sc = _mm_set1_ps(scale);
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) _mm_storeu_ps(s + r * lds, _mm_mul_ps(tree16x4(lo + r * C, hi + r * C), sc));
}

#include "kernels/cpu/attention_scores.hpp"

void softmax(float* s, int64_t n) {
  __m256 mx8 = _mm256_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(s + t));
  float lanes[8];
  _mm256_storeu_ps(lanes, mx8);
  float mx = -INFINITY;
  for (const float x : lanes) mx = x > mx ? x : mx;
  for (; t < n; ++t) mx = s[t] > mx ? s[t] : mx;
  const __m256 m = _mm256_set1_ps(mx);
  // Lane l of the sum takes s[t] for t mod 16 = l: lanes 0-7 in lo, 8-15 in hi.
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (t = 0; t + 16 <= n; t += 16) {
    const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), m));
    const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t + 8), m));
    _mm256_storeu_ps(s + t, e0);
    _mm256_storeu_ps(s + t + 8, e1);
    lo = _mm256_add_ps(lo, e0);
    hi = _mm256_add_ps(hi, e1);
  }
  if (t < n) {  // e > 0, so adding +0 in the lanes past n leaves the sums' bits alone
    const __m256i m0 = lanes_mask(n - t), m1 = lanes_mask(n - t - 8);
    const __m256 e0 = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + t, m0), m)), _mm256_castsi256_ps(m0));
    const __m256 e1 = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + t + 8, m1), m)), _mm256_castsi256_ps(m1));
    _mm256_maskstore_ps(s + t, m0, e0);
    _mm256_maskstore_ps(s + t + 8, m1, e1);
    lo = _mm256_add_ps(lo, e0);
    hi = _mm256_add_ps(hi, e1);
  }
  const float inv_f = 1.0f / tree16(lo, hi);
  const __m256 inv = _mm256_set1_ps(inv_f);
  for (t = 0; t + 8 <= n; t += 8) _mm256_storeu_ps(s + t, _mm256_mul_ps(_mm256_loadu_ps(s + t), inv));
  for (; t < n; ++t) s[t] *= inv_f;
}

// The weighted sum's tile, out[r][p0 .. p0 + 8 W) for R queries, as accumulators, with one key's
// step: acc[r][c] += p[r][j] * v_j[p0 + 8 c ..]. Full: all 8 W floats lie within the row (plain
// loads and stores); otherwise masks stop at its d floats.
template <int R, int W, bool Full>
struct sum_acc {
  __m256i m[W];
  __m256 acc[R * W];
  sum_acc(int64_t d, int64_t p0, float* const* out, bool resume) {
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) m[c] = Full ? _mm256_set1_epi32(-1) : lanes_mask(d - p0 - 8 * c);
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c)
        acc[r * W + c] = !resume ? _mm256_setzero_ps() : load(out[r] + p0 + 8 * c, c);
  }
  __m256 load(const float* at, int c) const { return Full ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, m[c]); }
  void key(const float* p, int64_t lds, int64_t j, const float* vp) {
    __m256 pb[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) pb[r] = _mm256_broadcast_ss(p + r * lds + j);
#pragma GCC unroll 8
    for (int c = 0; c < W; ++c) {
      __m256 vv = load(vp + 8 * c, c);
      asm("" : "+x"(vv));  // one load per V piece, not a memory operand per FMA
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * W + c] = _mm256_fmadd_ps(pb[r], vv, acc[r * W + c]);
    }
  }
  void store(int64_t p0, float* const* out) const {
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < W; ++c) {
        if (Full)
          _mm256_storeu_ps(out[r] + p0 + 8 * c, acc[r * W + c]);
        else
          _mm256_maskstore_ps(out[r] + p0 + 8 * c, m[c], acc[r * W + c]);
      }
  }
};

// out[r][p0 .. p0 + 8 W) continues (or starts, resume = false) its sums over keys [j0, j1) of a
// run of keys from c0 whose V rows are listed (`rows[j - c0]`). With `prefetch` (the first group
// of queries of a strided pool) the pass at p0 = 0 prefetches whole rows 8 keys ahead: each row
// lies in a page of its own, which the hardware prefetchers do not enter, and the later passes
// and groups find it in L1/L2. (Prefetching each pass's own piece stalled every pass of the first
// group: 8q at 3,000 keys 8.8 -> 7.6 ms a layer.)
template <int R, int W, bool Full>
void sum_tile(const float* p, int64_t lds, int64_t j0, int64_t j1, const float* const* rows, int64_t c0, int64_t d,
              int64_t p0, float* const* out, bool resume, bool prefetch) {
  sum_acc<R, W, Full> t(d, p0, out, resume);
  constexpr int64_t ahead = 8;
  prefetch = prefetch && p0 == 0;
  if (prefetch)
    for (int64_t j = j0; j < std::min(j0 + ahead, j1); ++j) prefetch_row(rows[j - c0], d);
  for (int64_t j = j0; j < j1; ++j) {
    if (prefetch && j + ahead < j1) prefetch_row(rows[j + ahead - c0], d);
    t.key(p, lds, j, rows[j - c0] + p0);
  }
  t.store(p0, out);
}

template <int R, int W>
void sum_tile_at(const float* p, int64_t lds, int64_t j0, int64_t j1, const float* const* rows, int64_t c0, int64_t d,
                 int64_t p0, float* const* out, bool resume, bool prefetch) {
  if (d - p0 >= 8 * W)
    sum_tile<R, W, true>(p, lds, j0, j1, rows, c0, d, p0, out, resume, prefetch);
  else
    sum_tile<R, W, false>(p, lds, j0, j1, rows, c0, d, p0, out, resume, prefetch);
}

// R queries (3: 12 accumulators + 3 broadcasts + 1 V piece of the 16 ymm, 7 loads per 12 FMAs;
// 2: decode with 2 query heads per kv head, as Qwen3-0.6B) over the keys [c0, c1) of a run. The
// limits are nondecreasing: all R sum the keys up to limit[0], then the last R - 1 continue up to
// limit[1], and so on (same FMAs in the same order per output).
template <int R>
void sum_group(const float* p, int64_t lds, const int64_t* limit, int64_t c0, int64_t c1, const float* const* rows,
               int64_t d, bool prefetch, float* const* out, bool resume) {
  constexpr int W = R == 1 ? 8 : 4;
  for (int64_t p0 = 0; p0 < d; p0 += 8 * W) {
    sum_tile_at<R, W>(p, lds, c0, std::min(limit[0], c1), rows, c0, d, p0, out, resume, prefetch);
    for (int t = 1; t < R; ++t) {  // the queries that see keys past limit[t - 1]
      const int64_t j0 = std::max(limit[t - 1], c0), j1 = std::min(limit[t], c1);
      if (j1 <= j0) continue;
      const float* pt = p + t * lds;
      if (R - t == 2)
        sum_tile_at<2, W>(pt, lds, j0, j1, rows, c0, d, p0, out + t, true, prefetch);
      else
        sum_tile_at<1, W>(pt, lds, j0, j1, rows, c0, d, p0, out + t, true, prefetch);
    }
  }
}

// Keys in runs of up to kListedRows (paged_attention's key ranges and decode blocks are one run):
// a run's V rows are listed once, not walked through the block table in each of the tile passes
// per group of queries, and only its first group prefetches them (the others find them in L1/L2).
constexpr int64_t kListedRows = 64;

void weighted_sum(const float* p, int64_t lds, const int64_t* limit, int nq, const attn_kv& kv, float* const* out,
                  bool resume) {
  if (nq <= 0) return;
  const int64_t end = limit[nq - 1];
  const bool strided = kv.row > kv.d;
  const float* rows[kListedRows];
  std::optional<kv_cursor> cur;  // built at key 0 only: a call with no keys may have no block
  for (int64_t c0 = 0;; c0 += kListedRows) {
    const int64_t c1 = std::min(end, c0 + kListedRows);
    for (int64_t j = c0; j < c1; ++j) {
      if (j == 0)
        cur.emplace(kv, 0);
      else
        cur->next();
      rows[j - c0] = kv.v + cur->at;
    }
    // Past the first run, queries whose keys all came before it are done.
    int i = 0;
    if (c0 > 0)
      while (limit[i] <= c0) ++i;
    const int first = i;
    const bool more = resume || c0 > 0;
    // Threes, with a pair at the end rather than a single (4 = 2 + 2, not 3 + 1).
    for (; nq - i >= 3 && nq - i != 4; i += 3)
      sum_group<3>(p + i * lds, lds, limit + i, c0, c1, rows, kv.d, strided && i == first, out + i, more);
    for (; i + 2 <= nq; i += 2)
      sum_group<2>(p + i * lds, lds, limit + i, c0, c1, rows, kv.d, strided && i == first, out + i, more);
    if (i < nq) sum_group<1>(p + i * lds, lds, limit + i, c0, c1, rows, kv.d, strided && i == first, out + i, more);
    if (c1 >= end) break;
  }
}

}  // namespace

void silu_mul_avx2(const float* gate, const float* up, int64_t count, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  if (i < count) {
    const __m256i m = lanes_mask(count - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(up + i, m)));
  }
}

// The codes widened to f16 equal to value * 2^-8 (matmul_avx2.cpp's codes_fp8 widening: sign-extend,
// shift left 7, clear bit 14) and F16C's exact vcvtph2ps, times 256 * scale: the same real product
// as value * scale, rounded once, so the same bits as dequantize_kv_row. S.1111.111 is NaN there
// and here. ~12 instructions per 16 codes against ~13 per 8 for the vectorised bit arithmetic.
void dequantize_fp8_avx2(const uint8_t* codes, float scale, int64_t n, float* out) {
  const __m256 s = _mm256_set1_ps(scale * 256.0f);
  const __m128i mag = _mm_set1_epi8(0x7f);
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xbfff)));
    __m256 lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s);
    __m256 hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s);
    const __m128i nan = _mm_cmpeq_epi8(_mm_and_si128(raw, mag), mag);
    if (!_mm_testz_si128(nan, nan)) {  // never written by kv_write; exact all the same
      lo = _mm256_blendv_ps(lo, qnan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan)));
      hi = _mm256_blendv_ps(hi, qnan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(nan, 8))));
    }
    _mm256_storeu_ps(out + i, lo);
    _mm256_storeu_ps(out + i + 8, hi);
  }
  for (; i < n; ++i) out[i] = f8e4m3_bits_to_f32(codes[i]) * scale;
}

}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

// Built for the baseline ISA: ops.cpp may name it on any CPU, then runs it only with AVX2 and FMA.
const attn_backend& attn_backend_avx2() {
  static const attn_backend b{"avx2", scores, softmax, weighted_sum};
  return b;
}

}  // namespace troupe::kernels::cpu
