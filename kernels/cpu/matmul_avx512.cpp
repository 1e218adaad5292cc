// AVX-512 (F/BW/VL) matmul back-end: one zmm = the 16 lanes of one dot product (matmul_backend.hpp).
// Small n streams the checkpoint rows and widens them in registers (decode is bandwidth-bound);
// larger n widens a panel of rows to fp32 once and reuses it for every activation row (prefill).
// NOTE: no AVX512_BF16 (vdpbf16ps) here: it rounds the fp32 activations to bf16.
// GCC 12 warns inside its own AVX-512 headers (_mm512_setzero_ps & co., GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_backend.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {  // internal linkage: no AVX-512 code can leak into other units through COMDAT folding

// ---- weight sources: 16 consecutive weights widened exactly to fp32 ----

struct src_f32 {
  using elem = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct src_bf16 {  // bf16 is the top half of an fp32: widen by a 16-bit shift
  using elem = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

struct src_f16 {  // vcvtph2ps is exact (every f16, subnormals included, is an fp32)
  using elem = uint16_t;
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};

// ---- the fixed reduction tree, M accumulators at a time ----

// out[m] = tree(a[m]) for m < M <= 16. Each step adds the same lane pairs as the scalar tree
// (l + l+8, then l + l+4, l + l+2, l + l+1) for up to 16 accumulators at once; float addition is
// commutative bit for bit, so the transposed layout does not change a result.
template <int M>
inline void reduce(const __m512* a, float* out) {
  static_assert(M >= 1 && M <= 16);
  constexpr int mt = (M + 1) / 2, mu = (mt + 1) / 2, mv = (mu + 1) / 2;
  const __m512 z = _mm512_setzero_ps();
  __m512 t[8], u[4], v[2];
  // A: t[i] = [a[2i] lanes 0-7 + 8-15, a[2i+1] lanes 0-7 + 8-15]
#pragma GCC unroll 8
  for (int i = 0; i < mt; ++i) {
    const __m512 p = a[2 * i], q = 2 * i + 1 < M ? a[2 * i + 1] : z;
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // B: quarter c of u[i] = accumulator 4i+c, its lanes 0-3 + 4-7
#pragma GCC unroll 4
  for (int i = 0; i < mu; ++i) {
    const __m512 p = t[2 * i], q = 2 * i + 1 < mt ? t[2 * i + 1] : z;
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // C: quarter c of v[i] = [acc 8i+c: 0+2, 1+3, acc 8i+4+c: 0+2, 1+3]
#pragma GCC unroll 2
  for (int i = 0; i < mv; ++i) {
    const __m512 p = u[2 * i], q = 2 * i + 1 < mu ? u[2 * i + 1] : z;
    v[i] = _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // D: lane 4c+m = accumulator 4m+c
  const __m512 p = v[0], q = mv > 1 ? v[1] : z;
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) out[m] = lanes[4 * (m % 4) + m / 4];
}

template <int M>
inline void reduce_any(const __m512* a, float* out) {
  if constexpr (M <= 16) {
    reduce<M>(a, out);
  } else {
    reduce<16>(a, out);
    reduce<M - 16>(a + 16, out + 16);
  }
}

inline __mmask16 tail_mask(int64_t cols) {
  return static_cast<__mmask16>((1u << (cols % 16)) - 1);  // 0 when cols is a multiple of 16
}

// ---- direct tiles: R activation rows x C weight rows read from the checkpoint ----

template <int R, int C, class Src>
void tile_direct(const float* x, int64_t ldx, const typename Src::elem* w, int64_t ldw, int64_t cols, float* y,
                 int64_t ldy) {
  __m512 acc[R * C];
#pragma GCC unroll 32
  for (int i = 0; i < R * C; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = cols / 16 * 16;
  for (int64_t k = 0; k < full; k += 16) {
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 wv = Src::load(w + c * ldw + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (const __mmask16 m = tail_mask(cols)) {
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(m, x + r * ldx + full);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 wv = Src::load(w + c * ldw + full, m);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  float out[R * C];
  reduce_any<R * C>(acc, out);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ldy + c] = out[r * C + c];
}

// Direct path: every weight byte is read once per call and activation rows stay in L1.
constexpr int direct_max_n = 3;
constexpr int direct_cols = 8;  // weight rows per direct tile: 8 independent FMA chains per activation row

template <int R, class Src>
void run_direct_rows(const float* x, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  const auto* wd = static_cast<const typename Src::elem*>(w.data);
  const int64_t ldw = w.cols, ldy = w.rows;
  int64_t j = j0;
  for (; j + direct_cols <= j1; j += direct_cols)
    tile_direct<R, direct_cols, Src>(x, w.cols, wd + j * ldw, ldw, w.cols, y + j, ldy);
  for (; j < j1; ++j) tile_direct<R, 1, Src>(x, w.cols, wd + j * ldw, ldw, w.cols, y + j, ldy);
}

template <class Src>
void run_direct(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  switch (n) {
    case 1: return run_direct_rows<1, Src>(x, w, j0, j1, y);
    case 2: return run_direct_rows<2, Src>(x, w, j0, j1, y);
    default: return run_direct_rows<3, Src>(x, w, j0, j1, y);
  }
}

// ---- packed path: a panel of weight rows widened once, reused by every activation row ----

constexpr int pack_cols = 6;   // weight rows per register tile
constexpr int pack_rows = 4;   // activation rows per register tile: 24 accumulators + 4 x + 1 w of 32 zmm
constexpr int panel_rows = 48; // weight rows widened per unit (8 sub-panels)

int64_t padded_cols(int64_t cols) { return (cols + 15) / 16 * 16; }

// Sub-panel layout: for each 16-wide k block, the pack_cols rows' 16 fp32 side by side, so a tile
// reads one sequential stream. Rows past the matrix are zeros (their results are never stored).
template <class Src>
void pack_subpanel(const typename Src::elem* w, int64_t ldw, int64_t live_rows, int64_t cols, float* dst) {
  const int64_t full = cols / 16 * 16;
  const __mmask16 m = tail_mask(cols);
  for (int c = 0; c < pack_cols; ++c) {
    float* d = dst + c * 16;
    if (c >= live_rows) {
      for (int64_t k = 0; k < padded_cols(cols); k += 16, d += pack_cols * 16) _mm512_store_ps(d, _mm512_setzero_ps());
      continue;
    }
    const auto* s = w + c * ldw;
    int64_t k = 0;
    for (; k < full; k += 16, d += pack_cols * 16) _mm512_store_ps(d, Src::load(s + k));
    if (m) _mm512_store_ps(d, Src::load(s + k, m));
  }
}

template <int R>
void tile_packed(const float* x, int64_t ldx, const float* wp, int64_t cols, float* out) {
  constexpr int C = pack_cols;
  __m512 acc[R * C];
#pragma GCC unroll 32
  for (int i = 0; i < R * C; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = cols / 16 * 16;
  for (int64_t k = 0; k < full; k += 16, wp += C * 16) {
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 wv = _mm512_load_ps(wp + c * 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (const __mmask16 m = tail_mask(cols)) {  // the packed tail is zero-padded; only x needs a mask
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(m, x + r * ldx + full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 wv = _mm512_load_ps(wp + c * 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  reduce_any<R * C>(acc, out);
}

template <class Src>
void run_packed(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* panel) {
  const auto* wd = static_cast<const typename Src::elem*>(w.data);
  const int64_t cols = w.cols, ldy = w.rows, sub_floats = pack_cols * padded_cols(cols);
  // Activation rows per block: keep the block (streamed once per sub-panel) within about 1 MB of L2.
  const int64_t block_n = std::max<int64_t>(pack_rows, (int64_t{1} << 18) / cols / pack_rows * pack_rows);
  float out[pack_rows * pack_cols];
  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min<int64_t>(panel_rows, j1 - jc);
    const int64_t subs = (nc + pack_cols - 1) / pack_cols;
    for (int64_t s = 0; s < subs; ++s)
      pack_subpanel<Src>(wd + (jc + s * pack_cols) * cols, cols, nc - s * pack_cols, cols, panel + s * sub_floats);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t s = 0; s < subs; ++s) {  // the sub-panel (24 KB at cols=1024) stays in L1
        const float* wp = panel + s * sub_floats;
        const int64_t live = std::min<int64_t>(pack_cols, nc - s * pack_cols);
        float* ys = y + jc + s * pack_cols;
        for (int64_t i = ic; i < ie; i += pack_rows) {
          const int64_t r = std::min<int64_t>(pack_rows, ie - i);
          switch (r) {
            case 4: tile_packed<4>(x + i * cols, cols, wp, cols, out); break;
            case 3: tile_packed<3>(x + i * cols, cols, wp, cols, out); break;
            case 2: tile_packed<2>(x + i * cols, cols, wp, cols, out); break;
            default: tile_packed<1>(x + i * cols, cols, wp, cols, out); break;
          }
          for (int64_t rr = 0; rr < r; ++rr)
            for (int64_t c = 0; c < live; ++c) ys[(i + rr) * ldy + c] = out[rr * pack_cols + c];
        }
      }
    }
  }
}

// ---- the back-end ----

int64_t unit_rows(int64_t n, const weight_ref&) { return n <= direct_max_n ? 64 : panel_rows; }

size_t scratch_floats(int64_t n, const weight_ref& w) {
  return n <= direct_max_n ? 0 : static_cast<size_t>(panel_rows * padded_cols(w.cols));
}

void run(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const bool direct = n <= direct_max_n;
  switch (w.type) {
    case dtype::f32: return direct ? run_direct<src_f32>(x, n, w, j0, j1, y) : run_packed<src_f32>(x, n, w, j0, j1, y, scratch);
    case dtype::bf16: return direct ? run_direct<src_bf16>(x, n, w, j0, j1, y) : run_packed<src_bf16>(x, n, w, j0, j1, y, scratch);
    case dtype::f16: return direct ? run_direct<src_f16>(x, n, w, j0, j1, y) : run_packed<src_f16>(x, n, w, j0, j1, y, scratch);
    default: return;  // matmul() rejected other dtypes before any thread started
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

// Built for the baseline ISA: matmul.cpp may call this on any CPU, then runs it only with AVX-512.
const matmul_backend& matmul_backend_avx512() {
  static const matmul_backend b{"avx512", unit_rows, scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
