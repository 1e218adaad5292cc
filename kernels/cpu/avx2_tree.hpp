// The 16-lane dot product's fixed reduction tree (matmul_backend.hpp) for lanes held in two ymm
// (lanes 0-7 in lo, 8-15 in hi), shared by the AVX2 matmul and attention. Include it inside an
// anonymous namespace, after #pragma GCC target("avx2,..."), so no AVX2 code leaks out of the unit.
#pragma once

// l + l+8, then l + l+4, l + l+2, l + l+1.
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, _MM_SHUFFLE(1, 1, 1, 1))));
}
