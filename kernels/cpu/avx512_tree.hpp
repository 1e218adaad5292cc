// The 16-lane dot product's fixed reduction tree (matmul_backend.hpp) for many accumulators at
// once, and the tile stores built on it, shared by the AVX-512 matmuls (f32 and bf16 compute) and
// attention. Include it inside an anonymous namespace, after #pragma GCC
// target("avx512f,avx512bw,avx512vl,avx512dq"), so no AVX-512 code leaks out of the unit.
#pragma once

// ---- the fixed reduction tree, 8 or 16 accumulators at a time ----
//
// Each step adds, for every accumulator, the lane pairs of the scalar tree (l + l+8, then l + l+4,
// l + l+2, l + l+1), several accumulators per instruction: one blend (ports 0/5), one shuffle (port 5)
// and one add per step instead of two shuffles. Float addition is commutative bit for bit, so
// which operand holds which half does not change a result.

inline __m512 step_a(__m512 p, __m512 q) {  // [p 0-7 + 8-15, q 0-7 + 8-15]
  return _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, p, q), _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(1, 0, 3, 2)));
}
inline __m512 step_b(__m512 t, __m512 s) {  // quarters: [t.q0+t.q1, s.q0+s.q1, t.q2+t.q3, s.q2+s.q3]
  const __m512i idx = _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
  return _mm512_add_ps(_mm512_mask_blend_ps(0xF0F0, t, s), _mm512_permutex2var_ps(t, idx, s));
}
inline __m512 step_c(__m512 u, __m512 v) {  // per quarter: [u0+u2, u1+u3, v0+v2, v1+v3]
  return _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, u, v), _mm512_shuffle_ps(u, v, _MM_SHUFFLE(1, 0, 3, 2)));
}
inline __m512 step_d(__m512 p, __m512 q) {  // per quarter: [p0+p1, q0+q1, p2+p3, q2+q3]
  const __m512i idx = _mm512_setr_epi32(1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30);
  return _mm512_add_ps(_mm512_mask_blend_ps(0xAAAA, p, q), _mm512_permutex2var_ps(p, idx, q));
}

// Lane i of the result = tree(a[i]). The steps leave accumulator i in lane
// {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15}[i]; one permute restores the order.
inline __m512 reduce16(const __m512* a) {
  __m512 t[8], u[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) t[i] = step_a(a[2 * i], a[2 * i + 1]);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) u[i] = step_b(t[2 * i], t[2 * i + 1]);
  const __m512 w = step_d(step_c(u[0], u[1]), step_c(u[2], u[3]));
  const __m512i idx = _mm512_setr_epi32(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
  return _mm512_permutexvar_ps(idx, w);
}

// Lane i of the result = tree(a[i]) for 8 accumulators.
inline __m256 reduce8(const __m512* a) {
  const __m512 u0 = step_b(step_a(a[0], a[1]), step_a(a[2], a[3]));
  const __m512 u1 = step_b(step_a(a[4], a[5]), step_a(a[6], a[7]));
  const __m512 v = step_c(u0, u1);
  const __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));  // lanes 0+1, 2+3
  // accumulator i sits in lanes {0, 8, 4, 12, 2, 10, 6, 14}[i] (and the lane after it)
  const __m512i idx = _mm512_setr_epi32(0, 8, 4, 12, 2, 10, 6, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, w));
}

// ---- stores ----

// The first `live` (<= 8) floats of v.
inline void store8(float* dst, __m256 v, int live) {
  if (live >= 8)
    _mm256_storeu_ps(dst, v);
  else
    _mm256_mask_storeu_ps(dst, static_cast<__mmask8>((1u << live) - 1), v);
}

// Reduces an R x 8 tile of accumulators (acc[r * 8 + c] for weight row c) and stores the first
// `live` outputs of each activation row.
template <int R>
inline void store_tile(const __m512* acc, float* y, int64_t ldy, int live) {
  static_assert(R >= 1 && R <= 3);
  if constexpr (R == 1) {
    store8(y, reduce8(acc), live);
  } else {
    const __m512 v = reduce16(acc);
    store8(y, _mm512_castps512_ps256(v), live);
    store8(y + ldy, _mm512_extractf32x8_ps(v, 1), live);
    if constexpr (R == 3) store8(y + 2 * ldy, reduce8(acc + 16), live);
  }
}
