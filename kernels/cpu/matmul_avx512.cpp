// AVX-512 (F/BW/VL/DQ) matmul back-end: one zmm = the 16 lanes of one dot product (matmul_backend.hpp).
// Four regimes, one arithmetic (docs/kernels.md): decode (n <= 3) streams the checkpoint rows and
// widens them in registers; small batches (n <= 7) do that once per three rows over an L2-sized
// unit; batched decode (n <= 60) streams each 6-row sub-panel once, widening it into L1 for the
// other activation rows; prefill widens 48-row panels once and reuses them. INT8 and FP8 weights
// take the same paths, each code widened to the float32 value * scale (matmul_quant.hpp); so do
// 4-bit u4 ones, whose nibbles look their weight up in a per-group table of the INT8 widening.
// NOTE: no AVX512_BF16 (vdpbf16ps) here: it rounds the fp32 activations to bf16.
// GCC 12 warns inside its own AVX-512 headers (_mm512_setzero_ps & co., GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <type_traits>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_quant.hpp"

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

// One weight row as the tiles read it, from column k0 on: load(k) its 16 widened weights at
// k0 + k, load(k, m) the masked last block, bytes(k) where a prefetch for k0 + k aims.
template <class Src>
struct row_of {
  using elem = typename Src::elem;
  static constexpr int64_t bits = 8 * sizeof(elem);  // per column
  const elem* p;
  static row_of at(const weight_ref& w, int64_t j, int64_t k0) { return {static_cast<const elem*>(w.data) + j * w.cols + k0}; }
  __m512 load(int64_t k) const { return Src::load(p + k); }
  __m512 load(int64_t k, __mmask16 m) const { return Src::load(p + k, m); }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k); }
};

// Quantized rows (matmul_quant.hpp), as matmul_avx2.cpp: each code becomes the float32 value *
// scale (exact widening, one rounding in the multiply), then the float tiles' dot product. A
// 16-block lies in one scale group (check_quantized_weight).
struct codes_i8 {  // sign-extend and convert (exact), times the scale
  using elem = int8_t;
  static float lane_scale(float scale) { return scale; }
  static __m512 widen_v(__m128i raw, __m512 s) { return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw)), s); }
  static __m512 widen(__m128i raw, float scale) { return widen_v(raw, _mm512_set1_ps(lane_scale(scale))); }
};

// FP8 e4m3: each code widened exactly to an f16 equal to value * 2^-8 (sign-extend to 16 bits,
// shift left 7, clear bit 14; vcvtph2ps is exact), times scale * 256: the float32 value * scale.
struct codes_fp8 {
  using elem = uint8_t;
  static float lane_scale(float scale) { return scale * 256.0f; }
  static __m512 widen_v(__m128i raw, __m512 s) {
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xbfff)));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), s);
  }
  static __m512 widen(__m128i raw, float scale) { return widen_v(raw, _mm512_set1_ps(lane_scale(scale))); }
};

template <class Codes>
struct quant_row {
  using elem = typename Codes::elem;
  static constexpr int64_t bits = 8;
  const elem* p;  // codes from column k0
  scale_cursor sc;
  int64_t k0;
  static quant_row at(const weight_ref& w, int64_t j, int64_t k0) {
    return {static_cast<const elem*>(w.data) + j * w.cols + k0, scale_cursor::at(w, j), k0};
  }
  float scale(int64_t k) const { return *sc.of(k0 + k); }
  __m512 load(int64_t k) const {
    return Codes::widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k)), scale(k));
  }
  __m512 load(int64_t k, __mmask16 m) const { return Codes::widen(_mm_maskz_loadu_epi8(m, p + k), scale(k)); }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k); }
};

// u4 rows (kernels.hpp: per 16 columns one 64-bit word, even columns in its low dword, odd ones
// in its high dword). Each group's 16 possible weights are a table, codes_i8's widening of the
// INT8 codes q - zero for q = 0..15 (so the same bits), and a block of 16 is one
// vpermps of it: the word broadcast to every qword puts the even columns' nibbles in the even
// lanes and the odd ones' in the odd lanes, a per-lane shift by 4 * (lane / 2) brings each lane's
// own to its low 4 bits, and vpermps reads only those. Three vector instructions per 16 weights
// (INT8 takes four) and half the bytes.
struct u4_row {
  static constexpr int64_t bits = 4;
  const uint8_t* p;  // the row's bytes from column k0 (k0 a multiple of 16)
  const uint8_t* z;  // the row's zeros
  scale_cursor sc;
  int64_t k0;
  // `table` holds the group of columns [lo, hi) (relative to k0; empty at first): one compare per
  // load in the usual ascending walk, the group's index computed only when it changes.
  mutable int64_t lo = 0, hi = 0;
  alignas(64) mutable float table[16];
  static u4_row at(const weight_ref& w, int64_t j, int64_t k0) {
    return {static_cast<const uint8_t*>(w.data) + j * (w.cols / 2) + k0 / 2, w.zeros + j * w.scale_cols(),
            scale_cursor::at(w, j), k0, 0, 0, {}};
  }
  void refill(int64_t k) const {
    const int64_t g = sc.group_of(k0 + k);
    lo = sc.shift == 62 ? -k0 : g * sc.group - k0;
    hi = sc.shift == 62 ? INT64_MAX : lo + sc.group;
    const __m128i q = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm512_store_ps(table, codes_i8::widen(_mm_sub_epi8(q, _mm_set1_epi8(static_cast<char>(z[g]))), sc.s[g]));
  }
  __m512 load(int64_t k) const {
    if (k >= hi || k < lo) [[unlikely]] refill(k);
    long long word;
    std::memcpy(&word, p + k / 2, 8);
    const __m512i shifts = _mm512_set_epi32(28, 28, 24, 24, 20, 20, 16, 16, 12, 12, 8, 8, 4, 4, 0, 0);
    const __m512i idx = _mm512_srlv_epi32(_mm512_set1_epi64(word), shifts);
    return _mm512_permutexvar_ps(idx, _mm512_load_ps(table));
  }
  // The tiles' masked last block: never reached (u4 cols are a multiple of 16), kept well-defined.
  __m512 load(int64_t k, __mmask16 m) const { return _mm512_maskz_mov_ps(m, load(k)); }
  const char* bytes(int64_t k) const { return reinterpret_cast<const char*>(p + k / 2); }
};

#include "kernels/cpu/avx512_tree.hpp"  // reduce16 / reduce8 / store_tile: the fixed tree, many accumulators at once

inline float reduce1(__m512 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, _MM_SHUFFLE(1, 1, 1, 1))));
}

// Reduces an R x C tile of accumulators (acc[r * C + c] for weight row c; C = 8: store_tile) and
// stores the first `live` outputs of each activation row.
template <int R, int C>
inline void store_tile_of(const __m512* acc, float* y, int64_t ldy, int live) {
  if constexpr (C == 8) {
    store_tile<R>(acc, y, ldy, live);
  } else {
    constexpr int n = R * C, padded = (n + 7) / 8 * 8;
    __m512 a[padded];
#pragma GCC unroll 32
    for (int i = 0; i < padded; ++i) a[i] = i < n ? acc[i] : _mm512_setzero_ps();
    alignas(64) float out[padded];
    int i = 0;
    for (; i + 16 <= padded; i += 16) _mm512_store_ps(out + i, reduce16(a + i));
    if (i < padded) _mm256_store_ps(out + i, reduce8(a + i));
    const __mmask16 m = static_cast<__mmask16>((1u << live) - 1);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, m, _mm512_maskz_loadu_ps(m, out + r * C));
  }
}

inline __mmask16 tail_mask(int64_t cols) {
  return static_cast<__mmask16>((1u << (cols % 16)) - 1);  // 0 when cols is a multiple of 16
}


// ---- blocking ----
constexpr int tile_cols = 8;       // weight rows per decode tile: 8 accumulators per activation row
constexpr int max_tile_rows = 3;   // decode: 24 accumulators + 3 x + 1 w of the 32 zmm registers
constexpr int pk_cols = 6;         // packed path: 4 x 6 tiles (24 accumulators + 4 x + 1 w): 10
constexpr int pk_rows = 4;         //   loads per 24 FMAs where 3 x 8 took 11, and 32 rows are 8 whole
                                   //   groups (3 x 8 left a group of 2): batch 32 +5% (docs/kernels.md)
constexpr int panel_rows = 48;     // weight rows widened at once: 8 sub-panels of 6
constexpr int64_t k_block = 1024;  // a sub-panel's k slice (6 x 1024 x 4 B = 24 KB) stays in L1
constexpr int64_t block_n = 60;    // activation rows per block: 60 x 48 x 64 B = 180 KB of partials
constexpr int64_t partial_row = panel_rows * 16;  // floats of partials per activation row

int64_t padded_cols(int64_t cols) { return (cols + 15) / 16 * 16; }

#include "kernels/cpu/row_prefetch.hpp"  // row_prefetch / make_prefetch: the next rows, a few lines per k step

// ---- streamed tiles: weights read straight from the checkpoint and widened in registers ----

// Decode's software prefetch at byte `at` of a tile's rows (`row_start(c)`: row c's first byte):
// each row 512 B ahead (the hardware streamers alone fall ~15% short), a line per row every 64
// bytes. Past its row's end the stream goes on `jump_rows` rows on, in the same row of the next
// tile: otherwise each tile would start with 8 rows of demand misses.
template <int C, class RowStart>
inline void prefetch_decode_rows(RowStart row_start, int64_t at, int64_t row_bytes, int64_t jump_rows) {
  const int64_t ahead = at + 512;
  if (ahead % 64 != 0) return;
  const int64_t jump = ahead >= row_bytes ? jump_rows * row_bytes : 0;
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm_prefetch(row_start(c) + ahead + jump, _MM_HINT_T0);
}

// One R x 8 tile over columns [0, klen) of x and of the 8 weight rows `rows` (both already offset
// to the k block; klen a multiple of 16, `tail` masks its last 16 when it reaches cols).
// `resume`: partials to continue from (null: start at +0); `save`: where to leave them (null: last
// k block, reduce into y). kPack: also leave the widened weights in `pack` (sub-panel layout, see
// pack_subpanel), so the tiles of the other activation rows read them from L1. The weight loads
// are demand loads among the FMAs, so out-of-order execution overlaps them with DRAM latency.
// `row_bytes` (decode only): bytes between weight rows, for the software prefetch; `jump_rows`:
// how many rows past its own the prefetch of each row continues once it runs past the row's end.
template <int R, class Row, bool kPack, int C = tile_cols>
void tile_stream(const float* x, int64_t ldx, const Row* rows, int64_t klen, __mmask16 tail,
                 const float* resume, float* save, float* y, int64_t ldy, int live, float* pack, row_prefetch& pf,
                 int64_t row_bytes = 0, int64_t jump_rows = tile_cols - 1) {
  __m512 acc[R * C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r * C + c] = resume ? _mm512_load_ps(resume + r * partial_row + c * 16) : _mm512_setzero_ps();
  const int64_t full = tail ? klen - 16 : klen;
  for (int64_t k = 0; k < full; k += 16) {
    pf.step();
    if constexpr (!kPack)
      prefetch_decode_rows<C>([rows](int c) { return rows[c].bytes(0); }, k * Row::bits / 8, row_bytes, jump_rows);
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 wv = rows[c].load(k);
      if constexpr (kPack) _mm512_store_ps(pack + (k / 16 * C + c) * 16, wv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (tail) {
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(tail, x + r * ldx + full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 wv = rows[c].load(full, tail);
      if constexpr (kPack) _mm512_store_ps(pack + (full / 16 * C + c) * 16, wv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (save) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) _mm512_store_ps(save + r * partial_row + c * 16, acc[r * C + c]);
  } else {
    store_tile_of<R, C>(acc, y, ldy, live);
  }
}

// The C row pointers of the tile at weight row j (offset to column k0; C: 8 in decode tiles, 6 in
// packed ones). Past the unit's last row they repeat that row: valid memory, and those outputs are
// never stored.
template <class Row, int C = tile_cols>
void tile_rows(const weight_ref& w, int64_t j, int live, int64_t k0, Row* rows) {
  for (int c = 0; c < C; ++c) rows[c] = Row::at(w, j + std::min(c, live - 1), k0);
}

// Decode (n <= 3): every weight byte is read once, widened in registers; x stays in L1.
constexpr int direct_max_n = 3;

// tile_stream<1, quant_row<Codes>, false> with each row's scale broadcast once per scale group
// instead of once per 16 codes: the same widening (value * scale) and FMAs in the same order, so
// the same bits. The generic tile kept eight rows' scale cursors, spilled to vector registers, and
// paid a vmovq, a shift and a compare-and-branch per 16 codes on the ports the FMAs use: INT8
// batch-1 matmuls of the 0.6B shape 23.2-23.9 -> 21.6-21.9 ms (docs/kernels.md). For groups of a
// power of two of columns or the whole row (the caller checks); decode tiles start at k0 = 0.
template <class Codes>
void tile_stream_q_1(const float* x, const quant_row<Codes>* rows, int64_t klen, __mmask16 tail, float* y,
                     int64_t ldy, int live, int64_t row_bytes, int64_t jump_rows) {
  constexpr int C = tile_cols;
  const typename Codes::elem* p[C];
  const float* s[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) p[c] = rows[c].p, s[c] = rows[c].sc.s;
  const int shift = rows[0].sc.shift;  // one group width per weight
  const int64_t full = tail ? klen - 16 : klen;
  const int64_t group = shift >= 62 ? full : int64_t{1} << shift;
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t g0 = 0; g0 < full; g0 += group) {
    const int64_t gi = shift >= 62 ? 0 : g0 >> shift, g1 = std::min(full, g0 + group);
    __m512 sv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) sv[c] = _mm512_set1_ps(Codes::lane_scale(s[c][gi]));
    for (int64_t k = g0; k < g1; k += 16) {
      prefetch_decode_rows<C>([&p](int c) { return reinterpret_cast<const char*>(p[c]); }, k, row_bytes, jump_rows);
      const __m512 xv = _mm512_loadu_ps(x + k);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 wv = Codes::widen_v(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[c] + k)), sv[c]);
        acc[c] = _mm512_fmadd_ps(xv, wv, acc[c]);
      }
    }
  }
  if (tail) {
    const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(xv, rows[c].load(full, tail), acc[c]);
  }
  store_tile<1>(acc, y, ldy, live);
}

// A single-row INT8 / FP8 decode tile by tile_stream_q_1 where it applies (true), else nothing
// (false: the caller runs tile_stream).
template <int R, class Row>
bool quant_single_row_tile(const float* x, const Row* rows, int64_t cols, float* y, int64_t ldy, int live,
                           int64_t row_bytes, int64_t jump_rows) {
  if constexpr (R == 1 && (std::is_same_v<Row, quant_row<codes_i8>> || std::is_same_v<Row, quant_row<codes_fp8>>)) {
    if (rows[0].sc.shift >= 0) {
      tile_stream_q_1(x, rows, padded_cols(cols), tail_mask(cols), y, ldy, live, row_bytes, jump_rows);
      return true;
    }
  }
  return false;
}

// Rows shorter than a 4 KB page are tiled a page apart (rows_per_page, matmul_backend.hpp).
template <int R, class Row>
void run_direct_rows(const float* x, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  const int64_t cols = w.cols, row_bytes = cols * Row::bits / 8;
  Row rows[tile_cols];
  const int64_t S = rows_per_page(row_bytes), span = tile_cols * S;
  int64_t j = j0;
  for (; S > 1 && j + span <= j1; j += span) {
    for (int64_t s = 0; s < S; ++s) {
      alignas(64) float out[R * tile_cols];
      for (int c = 0; c < tile_cols; ++c) rows[c] = Row::at(w, j + s + c * S, 0);
      row_prefetch none;
      // Within a group the next tile's row c is the next row in memory; after it, the next group's.
      if (!quant_single_row_tile<R>(x, rows, cols, out, tile_cols, tile_cols, row_bytes, s + 1 < S ? 0 : span - S))
        tile_stream<R, Row, false>(x, cols, rows, padded_cols(cols), tail_mask(cols), nullptr, nullptr, out, tile_cols,
                                   tile_cols, nullptr, none, row_bytes, s + 1 < S ? 0 : span - S);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < tile_cols; ++c) y[r * w.rows + j + s + c * S] = out[r * tile_cols + c];
    }
  }
  for (; j < j1; j += tile_cols) {
    const int live = static_cast<int>(std::min<int64_t>(tile_cols, j1 - j));
    tile_rows(w, j, live, 0, rows);
    row_prefetch none;  // decode prefetches within its own rows (tile_stream)
    if (!quant_single_row_tile<R>(x, rows, cols, y + j, w.rows, live, row_bytes, tile_cols - 1))
      tile_stream<R, Row, false>(x, cols, rows, padded_cols(cols), tail_mask(cols), nullptr, nullptr, y + j, w.rows, live,
                                 nullptr, none, row_bytes);
  }
}

// Decode (n <= 3) in one pass; small batches (unit_rows below) in one pass per three rows.
template <class Row>
void run_passes(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y) {
  for (int64_t i = 0; i < n; i += direct_max_n) {
    const float* xi = x + i * w.cols;
    float* yi = y + i * w.rows;
    switch (std::min<int64_t>(direct_max_n, n - i)) {
      case 1: run_direct_rows<1, Row>(xi, w, j0, j1, yi); break;
      case 2: run_direct_rows<2, Row>(xi, w, j0, j1, yi); break;
      default: run_direct_rows<3, Row>(xi, w, j0, j1, yi); break;
    }
  }
}

// ---- packed path (n > 3): weights widened once per tile of rows, reused by every activation row ----
//
// For each panel of 48 weight rows, block of activation rows, k block (<= 1024 wide) and 6-row
// sub-panel (whose widened k slice stays in L1): for each group of 4 activation rows, 24
// accumulators in registers over the k block; between k blocks they wait in `partials` as raw
// 16-lane sums (stored, never rounded or reduced early); after the last one the tree reduces them
// straight into y.
//   One block of activation rows (batched decode, n <= 60): the first group's tile streams the
//   weights from the checkpoint and leaves them widened in an L1 buffer for the other groups.
//   Several blocks (prefill): the whole panel is widened once into L2 and reused by every block.

// Sub-panel layout: for each 16-wide k block, the 8 rows' 16 fp32 side by side, so a tile reads one
// sequential stream. Packs the whole padded width; rows past the matrix are zeros.
template <class Row>
void pack_subpanel(const weight_ref& w, int64_t j, int64_t live_rows, float* dst) {
  const int64_t cols = w.cols;
  const int64_t full = cols / 16 * 16;
  const __mmask16 m = tail_mask(cols);
  for (int c = 0; c < pk_cols; ++c) {
    float* d = dst + c * 16;
    if (c >= live_rows) {
      for (int64_t k = 0; k < padded_cols(cols); k += 16, d += pk_cols * 16) _mm512_store_ps(d, _mm512_setzero_ps());
      continue;
    }
    const Row row = Row::at(w, j + c, 0);
    int64_t k = 0;
    for (; k < full; k += 16, d += pk_cols * 16) _mm512_store_ps(d, row.load(k));
    if (m) _mm512_store_ps(d, row.load(k, m));
  }
}

// One R x 6 tile reading widened weights from a sub-panel (see tile_stream for the arguments).
template <int R>
void tile_packed(const float* x, int64_t ldx, const float* wp, int64_t klen, __mmask16 tail, const float* resume,
                 float* save, float* y, int64_t ldy, int live, row_prefetch& pf) {
  constexpr int C = pk_cols;
  __m512 acc[R * C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r * C + c] = resume ? _mm512_load_ps(resume + r * partial_row + c * 16) : _mm512_setzero_ps();
  const int64_t full = tail ? klen - 16 : klen;
  for (int64_t k = 0; k < full; k += 16, wp += C * 16) {
    pf.step();
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512 wv = _mm512_load_ps(wp + c * 16);
      asm("" : "+v"(wv));  // one load into a register, not one memory operand per FMA (load ports)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (tail) {  // the packed tail is zero-padded; only x needs a mask
    __m512 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(tail, x + r * ldx + full);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512 wv = _mm512_load_ps(wp + c * 16);
      asm("" : "+v"(wv));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_fmadd_ps(xv[r], wv, acc[r * C + c]);
    }
  }
  if (save) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) _mm512_store_ps(save + r * partial_row + c * 16, acc[r * C + c]);
  } else {
    store_tile_of<R, C>(acc, y, ldy, live);
  }
}

template <class Row>
void run_packed(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const int64_t cols = w.cols, ldy = w.rows, kp = padded_cols(cols), sub_floats = pk_cols * kp;
  // Even k blocks of at most k_block columns (multiples of 16); the last one holds the masked tail.
  const int64_t kblocks = (kp + k_block - 1) / k_block;
  const int64_t kb_len = (kp / 16 + kblocks - 1) / kblocks * 16;
  const __mmask16 tail = tail_mask(cols);
  const bool streamed = n <= block_n;
  float* partials = scratch;
  float* panel = scratch + block_n * partial_row;
  Row rows[pk_cols];

  for (int64_t jc = j0; jc < j1; jc += panel_rows) {
    const int64_t nc = std::min<int64_t>(panel_rows, j1 - jc);
    const int64_t subs = (nc + pk_cols - 1) / pk_cols;
    if (!streamed)
      for (int64_t s = 0; s < subs; ++s)
        pack_subpanel<Row>(w, jc + s * pk_cols, nc - s * pk_cols, panel + s * sub_floats);
    for (int64_t ic = 0; ic < n; ic += block_n) {
      const int64_t ie = std::min(n, ic + block_n);
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        const int64_t k0 = kb * kb_len, klen = std::min(kb_len, kp - k0);
        const __mmask16 kt = k0 + klen == kp ? tail : 0;
        const bool last = kb + 1 == kblocks;
        for (int64_t s = 0; s < subs; ++s) {
          const int live = static_cast<int>(std::min<int64_t>(pk_cols, nc - s * pk_cols));
          const float* wp = streamed ? panel : panel + s * sub_floats + k0 * pk_cols;
          // Streamed: fetch the next sub-panel's slice (this k block; past this unit, the rows after
          // it, which the other threads are likely streaming too) over this sub-panel's tiles.
          row_prefetch pf;
          if (streamed) {
            const int64_t next = jc + (s + 1) * pk_cols;
            const int nrows = static_cast<int>(std::min<int64_t>(pk_cols, w.rows - next));
            const int64_t piece = std::min(klen, cols - k0) * Row::bits / 8;
            pf = make_prefetch(Row::at(w, next, k0).bytes(0), nrows, piece, cols * Row::bits / 8,
                               (ie - ic + pk_rows - 1) / pk_rows * (klen / 16));
          }
          for (int64_t i = ic; i < ie; i += pk_rows) {
            const float* xi = x + i * cols + k0;
            float* part = partials + (i - ic) * partial_row + s * pk_cols * 16;
            const float* resume = kb > 0 ? part : nullptr;
            float* save = last ? nullptr : part;
            float* yi = y + i * ldy + jc + s * pk_cols;
            const int64_t r = std::min<int64_t>(pk_rows, ie - i);
            if (streamed && i == ic) {  // first group: stream from the checkpoint, widen into `panel`
              tile_rows<Row, pk_cols>(w, jc + s * pk_cols, live, k0, rows);
              switch (r) {
                case 4: tile_stream<4, Row, true, pk_cols>(xi, cols, rows, klen, kt, resume, save, yi, ldy, live, panel, pf); break;
                case 3: tile_stream<3, Row, true, pk_cols>(xi, cols, rows, klen, kt, resume, save, yi, ldy, live, panel, pf); break;
                case 2: tile_stream<2, Row, true, pk_cols>(xi, cols, rows, klen, kt, resume, save, yi, ldy, live, panel, pf); break;
                default: tile_stream<1, Row, true, pk_cols>(xi, cols, rows, klen, kt, resume, save, yi, ldy, live, panel, pf); break;
              }
              continue;
            }
            switch (r) {
              case 4: tile_packed<4>(xi, cols, wp, klen, kt, resume, save, yi, ldy, live, pf); break;
              case 3: tile_packed<3>(xi, cols, wp, klen, kt, resume, save, yi, ldy, live, pf); break;
              case 2: tile_packed<2>(xi, cols, wp, klen, kt, resume, save, yi, ldy, live, pf); break;
              default: tile_packed<1>(xi, cols, wp, klen, kt, resume, save, yi, ldy, live, pf); break;
            }
          }
        }
      }
    }
  }
}

// ---- the back-end ----

// Decode streams 256 weight rows a unit (each new unit restarts the streams): +2-3% per token over
// 64-row units on the 0.6B shape (22.1 -> 22.5-22.9 tokens/s), as the grouped INT8 kernels measured.
// Small batches (4-7 rows) run the decode tiles once per three activation rows over a unit of up
// to 512 KB of weights: the first pass streams it from memory, the others find it in L2. The packed
// path below streams only ~50% of the read bandwidth at these sizes; passes took the 0.6B shape's
// layers (`troupe-bench-matmul --n 4 5 6 7 --shape model`) from 50 / 51 / 53 / 56 ms to 40 / 44 /
// 45 / 53 ms; from 8 rows the packed path is as fast or faster. Same tiles, so the same bits.
constexpr int passes_max_n = 7;

int64_t unit_rows(int64_t n, const weight_ref& w) {
  return n <= direct_max_n ? 256 : n <= passes_max_n ? pass_unit_rows(w) : panel_rows;
}

size_t scratch_floats(int64_t n, const weight_ref& w) {
  if (n <= passes_max_n) return 0;
  const int64_t panel = n <= block_n ? pk_cols * std::min(k_block, padded_cols(w.cols)) : panel_rows * padded_cols(w.cols);
  return static_cast<size_t>(block_n * partial_row + panel);
}

void run(const float* x, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, float* scratch) {
  const bool passes = n <= passes_max_n;
  switch (w.type) {
    case dtype::f32: return passes ? run_passes<row_of<src_f32>>(x, n, w, j0, j1, y) : run_packed<row_of<src_f32>>(x, n, w, j0, j1, y, scratch);
    case dtype::bf16: return passes ? run_passes<row_of<src_bf16>>(x, n, w, j0, j1, y) : run_packed<row_of<src_bf16>>(x, n, w, j0, j1, y, scratch);
    case dtype::f16: return passes ? run_passes<row_of<src_f16>>(x, n, w, j0, j1, y) : run_packed<row_of<src_f16>>(x, n, w, j0, j1, y, scratch);
    case dtype::i8: return passes ? run_passes<quant_row<codes_i8>>(x, n, w, j0, j1, y) : run_packed<quant_row<codes_i8>>(x, n, w, j0, j1, y, scratch);
    case dtype::u4: return passes ? run_passes<u4_row>(x, n, w, j0, j1, y) : run_packed<u4_row>(x, n, w, j0, j1, y, scratch);
    case dtype::f8_e4m3: return passes ? run_passes<quant_row<codes_fp8>>(x, n, w, j0, j1, y) : run_packed<quant_row<codes_fp8>>(x, n, w, j0, j1, y, scratch);
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
