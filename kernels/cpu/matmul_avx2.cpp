// AVX2+FMA+F16C matmul back-end: the 16 lanes of one dot product live in two ymm (lanes 0-7, 8-15),
// so results match the AVX-512 and scalar back-ends bit for bit (matmul_backend.hpp).
// Same two paths as AVX-512 with smaller tiles: 16 ymm registers instead of 32 zmm. INT8, u4 and
// FP8 weights come here too (matmul_quant.hpp): each code is widened to the float32 value * scale,
// then the same tiles run.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_quant.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {  // internal linkage: no AVX2 code can leak into other units through COMDAT folding

struct v16 {
  __m256 lo, hi;
};

struct src_f32 {
  using elem = float;
  static v16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
};
struct src_bf16 {
  using elem = uint16_t;
  static __m256 widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static v16 load(const uint16_t* p) {
    return {widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
};
struct src_f16 {
  using elem = uint16_t;
  static v16 load(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
};

// The last partial k block, zero-padded through a small copy (AVX2 has no 16-bit masked loads).
template <class Src>
v16 load_tail(const typename Src::elem* p, int64_t count) {
  typename Src::elem buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(count) * sizeof(buf[0]));
  return Src::load(buf);
}

// One weight row as the tiles read it: load(k) its 16 widened weights at k, tail(k, count) the
// last partial block zero-padded, bytes(k) where a prefetch for k aims.
template <class Src>
struct row_of {
  using elem = typename Src::elem;
  static constexpr int64_t bits = 8 * sizeof(elem);  // per column
  const elem* p;
  static row_of at(const weight_ref& w, int64_t j) { return {static_cast<const elem*>(w.data) + j * w.cols}; }
  v16 load(int64_t k) const { return Src::load(p + k); }
  v16 tail(int64_t k, int64_t count) const { return load_tail<Src>(p + k, count); }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k); }
};

// Quantized rows (matmul_quant.hpp): each code becomes the float32 value * scale (exact widening,
// one rounding in the multiply), then the float kernels' dot product. A 16-block lies in one scale
// group (check_quantized_weight).

// INT8: sign-extend and convert (exact), times the scale. Two 8-code loads: no shuffle to reach
// the upper half.
struct codes_i8 {
  using elem = int8_t;
  static v16 widen(const int8_t* p, const float* scale) {
    const __m256 s = _mm256_broadcast_ss(scale);
    return {_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))), s),
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))), s)};
  }
};

// FP8 e4m3: each code widened exactly to an f16 equal to value * 2^-8 (sign-extend to 16 bits,
// shift left 7, clear bit 14; vcvtph2ps is exact), times scale * 256: the float32 value * scale.
struct codes_fp8 {
  using elem = uint8_t;
  static v16 widen(const uint8_t* p, const float* scale) {
    const __m256 s = _mm256_mul_ps(_mm256_broadcast_ss(scale), _mm256_set1_ps(256.0f));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xbfff)));
    return {_mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s),
            _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s)};
  }
};

template <class Codes>
struct quant_row {
  using elem = typename Codes::elem;
  static constexpr int64_t bits = 8;
  const elem* p;
  scale_cursor sc;
  static quant_row at(const weight_ref& w, int64_t j) {
    return {static_cast<const elem*>(w.data) + j * w.cols, scale_cursor::at(w, j)};
  }
  v16 load(int64_t k) const { return Codes::widen(p + k, sc.of(k)); }
  v16 tail(int64_t k, int64_t count) const {
    alignas(16) elem buf[16] = {};
    std::memcpy(buf, p + k, static_cast<size_t>(count));
    return Codes::widen(buf, sc.of(k));
  }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k); }
};

// u4 rows (kernels.hpp, u4_layout.hpp: per 16 columns one 64-bit word, even columns in its low
// dword, odd ones in its high dword): each 16-block's q minus its group's zero (exact) is the INT8
// code, widened as codes_i8 does: the bits of the INT8 weight q - zero, from half its bytes. The
// group's zero and scale are kept from one block to the next instead of looked up, converted and
// broadcast for each (u4 groups are powers of two, or the whole row).
template <class Row>  // u4_row or u4_row_lanes: how a 16-block becomes lanes
struct u4_row_base {
  static constexpr int64_t bits = 4;
  const uint8_t* p = nullptr;  // the row's bytes
  const uint8_t* z = nullptr;  // the row's zeros
  scale_cursor sc{};           // u4 groups are powers of two or the whole row: shift >= 0
  mutable int64_t group_end = 0;
  mutable __m256i zero;
  mutable __m256 scale;
  static Row at(const weight_ref& w, int64_t j) {
    Row r;
    r.p = static_cast<const uint8_t*>(w.data) + j * (w.cols / 2);
    r.z = w.zeros + j * w.scale_cols();
    r.sc = scale_cursor::at(w, j);
    return r;
  }
  void group(int64_t k) const {
    if (k < group_end) return;
    const int64_t g = k >> sc.shift;
    zero = _mm256_set1_epi32(z[g]);
    scale = _mm256_set1_ps(sc.s[g]);
    group_end = (g + 1) << sc.shift;
  }
  // q - zero of 8 lanes (low 4 bits of each, the rest masked off or zero) as float times the scale.
  v16 widen(__m256i lo, __m256i hi) const {
    return {_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(lo, zero)), scale),
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(hi, zero)), scale)};
  }
  // Never reached: u4 cols are a multiple of 16.
  v16 tail(int64_t k, int64_t) const { return static_cast<const Row*>(this)->load(k); }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k / 2); }
};

// Columns in order (the packed path): the word broadcast to every qword and shifted per lane puts
// each column's q in its lane's low 4 bits. (u4_row_lanes' widening put back in column order per
// block instead, one decoder for both paths, was 5-13% slower at n = 8 and 16 on Zen 2.)
struct u4_row : u4_row_base<u4_row> {
  v16 load(int64_t k) const {
    group(k);
    long long word;
    std::memcpy(&word, p + k / 2, 8);
    const __m256i v = _mm256_set1_epi64x(word), nib = _mm256_set1_epi32(15);
    return widen(_mm256_and_si256(_mm256_srlv_epi32(v, _mm256_set_epi32(12, 12, 8, 8, 4, 4, 0, 0)), nib),
                 _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_set_epi32(28, 28, 24, 24, 20, 20, 16, 16)), nib));
  }
};

// The direct path's u4 rows: each byte of a block's word widened to a lane (vpmovzxbd), its low
// nibbles then its high ones, so the lanes hold the columns in the bytes' order (u4_layout.hpp):
// 0 4 8 12 1 5 9 13 | 2 6 10 14 3 7 11 15, in three operations for 16 weights instead of u4_row's
// broadcast, two shifts and two masks. The activations are read in the same order (u4_lanes_x)
// and each accumulator is put back in column order before the sum (from_u4_lanes): every lane sums
// the same products in the same order as u4_row's, so the bits are the same. With the cached group
// values, 1.3x faster than u4_row's widening at batch 1 on Zen 2 (docs/benchmarks.md).
struct u4_row_lanes : u4_row_base<u4_row_lanes> {
  v16 load(int64_t k) const {
    group(k);
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + k / 2)));
    return widen(_mm256_and_si256(b, _mm256_set1_epi32(15)), _mm256_srli_epi32(b, 4));
  }
};

// `rows` activation rows of `cols` (a multiple of 16) in u4_row_lanes' order, 16 columns at a time.
inline void u4_lanes_x(const float* x, int64_t rows, int64_t cols, float* out) {
  const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t k = 0; k < rows * cols; k += 16) {
    const __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + k), even_odd);      // 0 2 4 6 | 1 3 5 7
    const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + k + 8), even_odd);  // 8 10 12 14 | 9 11 13 15
    _mm256_storeu_ps(out + k, _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm256_storeu_ps(out + k + 8, _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

// An accumulator of u4_row_lanes' order in column order.
inline v16 from_u4_lanes(const v16& a) {
  const __m256i idx = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  return {_mm256_permutevar8x32_ps(_mm256_unpacklo_ps(a.lo, a.hi), idx),   // 0 2 4 6 | 1 3 5 7 -> 0..7
          _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(a.lo, a.hi), idx)};  // 8 10 12 14 | 9 11 13 15 -> 8..15
}

template <class Row>
constexpr bool u4_lanes = std::is_same_v<Row, u4_row_lanes>;

#include "kernels/cpu/avx2_tree.hpp"

inline float reduce(const v16& a) { return tree16(a.lo, a.hi); }

inline void fma16(const v16& x, const v16& w, v16& acc) {
  acc.lo = _mm256_fmadd_ps(x.lo, w.lo, acc.lo);
  acc.hi = _mm256_fmadd_ps(x.hi, w.hi, acc.hi);
}

// R activation rows x C weight rows; WLoad(c, k) gives the 16 widened weights of row c at k.
// WPrefetch(k) is called once per k step (decode: pull each row 512 B ahead).
// Lanes: the lanes hold the columns in u4_row_lanes' order (x too), put back before the sum.
template <int R, int C, bool Lanes = false, class WLoad, class WTail, class WPrefetch>
inline void tile(const float* x, int64_t ldx, int64_t cols, WLoad wload, WTail wtail, WPrefetch wprefetch, float* out) {
  v16 acc[R * C];
#pragma GCC unroll 16
  for (int i = 0; i < R * C; ++i) acc[i] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t full = cols / 16 * 16;
  for (int64_t k = 0; k < full; k += 16) {
    wprefetch(k);
    v16 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = src_f32::load(x + r * ldx + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const v16 wv = wload(c, k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) fma16(xv[r], wv, acc[r * C + c]);
    }
  }
  if (full < cols) {
    v16 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = load_tail<src_f32>(x + r * ldx + full, cols - full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const v16 wv = wtail(c, full);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) fma16(xv[r], wv, acc[r * C + c]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R * C; ++i) out[i] = reduce(Lanes ? from_u4_lanes(acc[i]) : acc[i]);
}

// ---- direct path (n <= 3; in passes up to 15): weights streamed from the checkpoint, widened in registers ----

constexpr int direct_max_n = 3;

template <int R, class Row>
void run_direct_rows(const float* x, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  constexpr int C = R == 1 ? 4 : R == 2 ? 3 : 2;  // 2*R*C accumulator registers of 16
  constexpr bool lanes = u4_lanes<Row>;
  const int64_t cols = w.cols, ldy = w.rows;
  if constexpr (lanes) {  // the activations in the rows' lane order, once a call
    thread_local std::vector<float> xl;
    xl.resize(static_cast<size_t>(R * cols));
    u4_lanes_x(x, R, cols, xl.data());
    x = xl.data();
  }
  float out[R * C];
  int64_t j = j0;
  // The C rows first, first + stride, ...: y gets their outputs at the same row numbers.
  auto rows_tile = [&](int64_t first, int64_t stride) {
    Row wr[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) wr[c] = Row::at(w, first + c * stride);
    auto ahead = [&](int64_t k) {  // the hardware streamers alone fall ~15% short of the bandwidth
      if ((k * Row::bits / 8) % 64 == 0)
        for (int c = 0; c < C; ++c) _mm_prefetch(wr[c].bytes(k) + 512, _MM_HINT_T0);
    };
    tile<R, C, lanes>(
        x, cols, cols, [&](int c, int64_t k) { return wr[c].load(k); },
        [&](int c, int64_t k) { return wr[c].tail(k, cols - k); }, ahead, out);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) y[r * ldy + first + c * stride] = out[r * C + c];
  };
  // Rows shorter than a page: tiles of rows a page apart (rows_per_page, matmul_backend.hpp);
  // past a row's end the 512 B prefetch runs into the next tile's row.
  const int64_t row_bytes = cols * Row::bits / 8;
  const int64_t S = rows_per_page(row_bytes), span = C * S;
  for (; S > 1 && j + span <= j1; j += span)
    for (int64_t s = 0; s < S; ++s) rows_tile(j + s, S);
  for (; j + C <= j1; j += C) rows_tile(j, 1);
  for (; j < j1; ++j) {
    const Row wr = Row::at(w, j);
    tile<R, 1, lanes>(
        x, cols, cols, [&](int, int64_t k) { return wr.load(k); }, [&](int, int64_t k) { return wr.tail(k, cols - k); },
        [](int64_t) {}, out);
    for (int r = 0; r < R; ++r) y[r * ldy + j] = out[r];
  }
}

// The fewest passes, rows spread evenly (4 = 2 + 2, 7 = 3 + 2 + 2): each pass widens every weight
// again, so a pass of one row costs nearly what a pass of three does (5-9% less time at n = 7, 10,
// 13 than 3 + 3 + ... + 1).
template <class Row>
void run_passes(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  const int64_t passes = (n + direct_max_n - 1) / direct_max_n;
  for (int64_t p = 0, i = 0; p < passes; ++p) {
    const int64_t rows = (n - i + passes - p - 1) / (passes - p);
    const float* xi = x + i * w.cols;
    float* yi = y + i * w.rows;
    i += rows;
    switch (rows) {
      case 1: run_direct_rows<1, Row>(xi, w, j0, j1, yi); break;
      case 2: run_direct_rows<2, Row>(xi, w, j0, j1, yi); break;
      default: run_direct_rows<3, Row>(xi, w, j0, j1, yi); break;
    }
  }
}

// ---- packed path: a panel of weight rows widened once, reused by every activation row ----

constexpr int pack_cols = 3;    // weight rows per register tile
constexpr int pack_rows = 2;    // activation rows per tile: 12 accumulator ymm + 2 x + 1 w
constexpr int panel_rows = 48;  // weight rows widened per unit

int64_t padded_cols(int64_t cols) { return (cols + 15) / 16 * 16; }

// For each 16-wide k block, the pack_cols rows' 16 fp32 side by side; missing rows are zeros.
template <class Row>
void pack_subpanel(const weight_ref& w, int64_t j, int64_t live_rows, float* dst) {
  const int64_t cols = w.cols, full = cols / 16 * 16;
  for (int c = 0; c < pack_cols; ++c) {
    float* d = dst + c * 16;
    if (c >= live_rows) {
      for (int64_t k = 0; k < padded_cols(cols); k += 16, d += pack_cols * 16) std::memset(d, 0, 16 * sizeof(float));
      continue;
    }
    const Row s = Row::at(w, j + c);
    int64_t k = 0;
    for (; k < full; k += 16, d += pack_cols * 16) {
      const v16 v = s.load(k);
      _mm256_store_ps(d, v.lo);
      _mm256_store_ps(d + 8, v.hi);
    }
    if (full < cols) {
      const v16 v = s.tail(k, cols - k);
      _mm256_store_ps(d, v.lo);
      _mm256_store_ps(d + 8, v.hi);
    }
  }
}

// R x 3 tile on a packed sub-panel, one 8-lane half at a time: 12 accumulators, R x and one w
// register. The weights go through a register (not one memory operand per FMA: load ports).
template <int R>
void tile_packed(const float* x, int64_t cols, const float* wp, float* out) {
  constexpr int C = pack_cols;
  __m256 acc[2][R * C];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 8
    for (int i = 0; i < R * C; ++i) acc[h][i] = _mm256_setzero_ps();
  const int64_t full = cols / 16 * 16;
  for (int64_t k = 0; k < full; k += 16, wp += C * 16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 xv[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        xv[r] = _mm256_loadu_ps(x + r * cols + k + 8 * h);
        asm("" : "+x"(xv[r]));
      }
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        __m256 wv = _mm256_load_ps(wp + c * 16 + 8 * h);
        asm("" : "+x"(wv));
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) acc[h][r * C + c] = _mm256_fmadd_ps(xv[r], wv, acc[h][r * C + c]);
      }
    }
  }
  if (full < cols) {  // the packed tail is zero-padded; x through a zero-padded copy
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const v16 xv = load_tail<src_f32>(x + r * cols + full, cols - full);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        acc[0][r * C + c] = _mm256_fmadd_ps(xv.lo, _mm256_load_ps(wp + c * 16), acc[0][r * C + c]);
        acc[1][r * C + c] = _mm256_fmadd_ps(xv.hi, _mm256_load_ps(wp + c * 16 + 8), acc[1][r * C + c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R * C; ++i) out[i] = reduce(v16{acc[0][i], acc[1][i]});
}

template <class Row>
void run_packed(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* panel) {
  const int64_t cols = w.cols, ldy = w.rows, sub_floats = pack_cols * padded_cols(cols);
  const int64_t block_n = std::max<int64_t>(pack_rows, (int64_t{1} << 18) / cols / pack_rows * pack_rows);
  float out[pack_rows * pack_cols];
  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min<int64_t>(panel_rows, j1 - jc);
    const int64_t subs = (nc + pack_cols - 1) / pack_cols;
    for (int64_t s = 0; s < subs; ++s)
      pack_subpanel<Row>(w, jc + s * pack_cols, nc - s * pack_cols, panel + s * sub_floats);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t s = 0; s < subs; ++s) {
        const float* wp = panel + s * sub_floats;
        const int64_t live = std::min<int64_t>(pack_cols, nc - s * pack_cols);
        float* ys = y + jc + s * pack_cols;
        for (int64_t i = ic; i < ie; i += pack_rows) {
          const int64_t r = std::min<int64_t>(pack_rows, ie - i);
          if (r == 2)
            tile_packed<2>(x + i * cols, cols, wp, out);
          else
            tile_packed<1>(x + i * cols, cols, wp, out);
          for (int64_t rr = 0; rr < r; ++rr)
            for (int64_t c = 0; c < live; ++c) ys[(i + rr) * ldy + c] = out[rr * pack_cols + c];
        }
      }
    }
  }
}

// Decode streams 256 weight rows a unit, as the AVX-512 and INT8 back-ends do (17.9 -> 18.1 tokens/s
// on the 0.6B shape with TROUPE_ISA=avx2: fewer restarts of the weight streams).
// Small batches run the decode tiles once per three activation rows over a unit of at most 512 KB
// of weights (the first pass streams it, the others find it in L2), as the AVX-512 back-end does
// up to 7 rows. Each pass widens every weight again, so how many rows passes pay for depends on
// what widening costs against the packed path's one widening a panel (`troupe-bench-matmul --threads
// 2 --shape model --n ...`, the 0.6B layers): float weights up to 15 rows (n = 4 / 8 / 12 / 15 took
// 79 / 109 / 144 / 166 ms packed and take 59 / 91 / 129 / 159 ms in passes; at 16 they tie); INT8
// up to 6 (Zen 2, 2026-12-03: n = 4 / 8 / 12 in passes 56 / 102 / 153 ms, packed 61 / 88 / 114; level
// at 6); u4 and FP8, dearer to widen, from 4 on packed (u4 n = 4 / 8 / 12: 73 / 125 / 177 -> 65 / 93
// / 117 ms; FP8 n = 4 / 8 / 12: 80 / 134 / 190 -> 72 / 106 / 140). Same tiles, same bits.
int64_t passes_max_n(const weight_ref& w) {
  switch (w.type) {
    case dtype::i8: return 6;
    case dtype::u4:
    case dtype::f8_e4m3: return direct_max_n;
    default: return 15;
  }
}
int64_t unit_rows(int64_t n, const weight_ref& w) {
  return n <= direct_max_n ? 256 : n <= passes_max_n(w) ? pass_unit_rows(w) : panel_rows;
}

size_t scratch_floats(int64_t n, const weight_ref& w) {
  return n <= passes_max_n(w) ? 0 : static_cast<size_t>(panel_rows * padded_cols(w.cols));
}

void run(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const bool passes = n <= passes_max_n(w);
  switch (w.type) {
    case dtype::f32: return passes ? run_passes<row_of<src_f32>>(x, n, w, j0, j1, y) : run_packed<row_of<src_f32>>(x, n, w, j0, j1, y, scratch);
    case dtype::bf16: return passes ? run_passes<row_of<src_bf16>>(x, n, w, j0, j1, y) : run_packed<row_of<src_bf16>>(x, n, w, j0, j1, y, scratch);
    case dtype::f16: return passes ? run_passes<row_of<src_f16>>(x, n, w, j0, j1, y) : run_packed<row_of<src_f16>>(x, n, w, j0, j1, y, scratch);
    case dtype::i8: return passes ? run_passes<quant_row<codes_i8>>(x, n, w, j0, j1, y) : run_packed<quant_row<codes_i8>>(x, n, w, j0, j1, y, scratch);
    case dtype::u4: return passes ? run_passes<u4_row_lanes>(x, n, w, j0, j1, y) : run_packed<u4_row>(x, n, w, j0, j1, y, scratch);
    case dtype::f8_e4m3: return passes ? run_passes<quant_row<codes_fp8>>(x, n, w, j0, j1, y) : run_packed<quant_row<codes_fp8>>(x, n, w, j0, j1, y, scratch);
    default: return;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

// Built for the baseline ISA: matmul.cpp may call this on any CPU, then runs it only with AVX2.
const matmul_backend& matmul_backend_avx2() {
  static const matmul_backend b{"avx2", unit_rows, scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
