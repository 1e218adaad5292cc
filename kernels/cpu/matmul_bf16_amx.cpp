// matmul back-ends (matmul_bf16.hpp) on Intel AMX. TDPBF16PS multiplies a 16 x 32 bf16 tile (16
// rows, 32 columns) by a 32 x 16 tile stored as column pairs into a 16 x 16 fp32 tile, 8192
// multiply-adds in ~16 cycles: ~15x the fp32 FMA rate of the same core.
// Two arithmetics share the code, by P, the activation planes: P = 1 is the bf16 compute mode (x
// rounded to bf16); P = 3 is the f32 mode for BF16 weights (matmul_f32_backend_amx): each x split
// exactly into three bf16 parts, hi + mid + lo, every part a tile of its own, and each k block adds
// w * hi, w * mid, w * lo in that order into one fp32 accumulator. A bf16 weight times a bf16 part
// is exact in fp32, so the only roundings are the tile unit's sums, as in an fp32 dot product.
// Decode (at most 32 activation rows): the weights are the row tiles, read in place from the
// checkpoint (row stride = the row's bytes), the activations the column-pair tiles that pack()
// writes once per call; results (weight rows x activation rows) are transposed into y.
// Prefill: the activations are the row tiles and each 32-row weight block is copied once into
// column-pair tiles, so results land in y's layout. Both run 2 x 2 tiles over the whole k range.
// Each output depends only on its own weight row, activation row and cols (the tile unit computes
// every element on its own, the same bits in either orientation; tested bitwise across n,
// positions and threads), so batch invariance holds. The tile unit's summation is not vdpbf16ps's
// (docs/kernels.md, "bf16 compute on Intel AMX").
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_bf16.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-bf16,avx2,fma,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {  // internal linkage: no AVX-512 / AMX code can leak into other units through COMDAT folding

#include "kernels/cpu/transpose16_avx512.hpp"

constexpr int64_t group_rows = 16;  // activation rows per activation tile (each plane's)
constexpr int64_t kblock = 32;      // columns per tile (16 bf16 pairs = 64 bytes a tile row)
constexpr int64_t tile_elems = 512; // bf16 elements in one packed tile (1 KB)

// Tiles 0-3: the 2 x 2 fp32 accumulators; 4-5: row tiles; 6-7: column-pair tiles. Each 16 x 64 B.
// A decode call of n < 16 activation rows narrows the column-pair and accumulator tiles to n
// lanes (4n bytes a row), and tile 5, which then holds the f32 mode's third activation plane
// (block); tile 4, the weights, stays 64 B: see narrow_lanes.
struct alignas(64) tile_config {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// The configuration for `lanes` activation rows (1-16) on the column-pair side.
const tile_config& config_for(int64_t lanes) {
  static const auto configs = [] {
    std::array<tile_config, 17> c{};
    for (int l = 1; l <= 16; ++l)
      for (int t : {0, 1, 2, 3, 5, 6, 7}) c[l].colsb[t] = static_cast<uint16_t>(4 * l);
    for (auto& k : c) k.colsb[4] = 64;
    return c;
  }();
  return configs[static_cast<size_t>(lanes)];
}


// f32_to_bf16 (runtime/core/dtype.hpp) on 16 lanes: nearest even, quiet NaNs; bf16 in the low half.
__m512i round_to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(bits, 16);
  const __m512i rounding = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, rounding), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
}

// The exact three-way split of 16 lanes v into bf16 parts (16 each, written to part[0..2]): hi = v
// truncated to bf16, mid = (v - hi) truncated, lo = v - hi - mid. Each difference is exact in fp32
// (the truncated value shares v's sign and leading bits), and what is left after two truncations
// has at most 8 significant bits, so lo is exact: hi + mid + lo = v for every finite v (a part
// below 2^-126 reads as zero on the tiles: DAZ, ~2^-100 of the row's values). Infinities and NaNs
// are all in hi (a NaN quiet, as f32_to_bf16 makes it); their mid and lo are 0.
void split3(__m512 v, uint16_t* hi_out, uint16_t* mid_out, uint16_t* lo_out) {
  const __m512i bits = _mm512_castps_si512(v), exp = _mm512_set1_epi32(0x7f800000);
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), exp);
  const __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(bits, exp), exp);
  const __m512i hi = _mm512_srli_epi32(bits, 16);
  const __m512 r1 = _mm512_maskz_sub_ps(finite, v, _mm512_castsi512_ps(_mm512_and_si512(bits, top)));
  const __m512 r2 = _mm512_sub_ps(r1, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r1), top)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi_out),
                     _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(hi, nan, hi, _mm512_set1_epi32(0x40))));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mid_out), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(r1), 16)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo_out), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(r2), 16)));
}

int64_t blocks_of(int64_t cols) { return bf16_padded_cols(cols) / kblock; }

// The first `count` of 16 lanes (all of them from 16 on, none at 0 or below).
__mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffff : count <= 0 ? 0 : (1u << count) - 1);
}

// The packed activations: per group of 16 rows, per 32-column block, P tiles (one per plane).
template <int P>
size_t xb_elems(int64_t n, int64_t cols) {
  return static_cast<size_t>((n + group_rows - 1) / group_rows * blocks_of(cols) * P * tile_elems);
}

// Prefill (more than 2 groups of 16 activation rows) puts the activations on the tiles' row side
// and the weights on the column-pair side; decode the other way round (weights read in place). The
// tile unit gives the same bits either way: x * w and w * x are the same product, summed in the
// same k order (checked on 512,000 random outputs, and by the batch-invariance tests).
bool prefill_layout(int64_t n) { return (n + group_rows - 1) / group_rows > 2; }

// Activation lanes of a decode call's column-pair tiles: n below 16 packs only n lanes a tile row
// (a tile of 64n bytes, its rows 4n bytes apart), so batch 1 reads 64 bytes of x per tile instead of
// a 1 KB tile of mostly zeros (x of the 0.6B shape's down_proj: 18 KB, in L1, against 288 KB with
// three planes). The tile unit computes each output element on its own, so the bits are those of
// the full tile (tested: batch invariance crosses n = 1 and the wider calls).
int64_t narrow_lanes(int64_t n) { return prefill_layout(n) ? group_rows : std::min(n, group_rows); }
// Elements of one packed activation tile for n rows.
int64_t x_tile_elems(int64_t n) { return 32 * narrow_lanes(n); }

// 16 rows of 32 bf16 (src rows `ld` elements apart, zero past `live` rows and `left` columns),
// rounded from f32 (F32 = true) or copied, as 16 registers of 16 column pairs.
template <bool F32, typename T>
void load_rows(const T* src, int64_t ld, int64_t live, int64_t left, __m512i r[16]) {
  const __mmask16 lo = first_lanes(left), hi = first_lanes(left - 16);
  for (int64_t t = 0; t < group_rows; ++t) {
    if (t >= live) {
      r[t] = _mm512_setzero_si512();
      continue;
    }
    const T* row = src + t * ld;
    if constexpr (F32) {
      const __m256i a = _mm512_cvtepi32_epi16(round_to_bf16(_mm512_maskz_loadu_ps(lo, row)));
      const __m256i c = _mm512_cvtepi32_epi16(round_to_bf16(_mm512_maskz_loadu_ps(hi, row + 16)));
      r[t] = _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
    } else {
      const __mmask32 m = static_cast<__mmask32>(left >= 32 ? 0xffffffffu : (uint64_t{1} << left) - 1);
      r[t] = _mm512_maskz_loadu_epi16(m, row);
    }
  }
}

// Group g's activation rows (zero past n and past cols), P 1 KB tiles per 32 columns (plane q of
// block b at tile (g * nb + b) * P + q): decode as column pairs (tile row p lane t = row 16g + t's
// columns 32b + 2p, 32b + 2p + 1), prefill as rows (tile row t = row 16g + t's 32 columns).
template <int P>
void pack(const float* x, int64_t n, int64_t cols, uint16_t* xb, int64_t g) {
  const int64_t nb = blocks_of(cols), first = g * group_rows;
  const int64_t live = std::min<int64_t>(group_rows, n - first);
  const bool rows = prefill_layout(n);
  const int64_t lanes = narrow_lanes(n), span = x_tile_elems(n);
  for (int64_t b = 0; b < nb; ++b) {
    const float* src = x + first * cols + b * kblock;
    const int64_t left = std::min<int64_t>(kblock, cols - b * kblock);
    // Three planes: the block's rows split once (zero past cols) into 16 x 32 bf16 each, then
    // each plane copied into its tile as P = 1 rounds into its one.
    alignas(64) uint16_t parts[3][group_rows * kblock];
    if constexpr (P == 3)
      for (int64_t t = 0; t < live; ++t)
        for (int h = 0; h < 2; ++h)
          split3(_mm512_maskz_loadu_ps(first_lanes(left - 16 * h), src + t * cols + 16 * h), parts[0] + t * kblock + 16 * h,
                 parts[1] + t * kblock + 16 * h, parts[2] + t * kblock + 16 * h);
    for (int q = 0; q < P; ++q) {
      __m512i r[16];
      if constexpr (P == 3) load_rows<false>(parts[q], kblock, live, kblock, r);
      else load_rows<true>(src, cols, live, left, r);
      if (!rows) transpose16x16_epi32(r);
      uint16_t* out = xb + ((g * nb + b) * P + q) * span;
      if (lanes == group_rows)
        for (int p = 0; p < 16; ++p) _mm512_store_si512(out + p * 32, r[p]);
      else
        for (int p = 0; p < 16; ++p) _mm512_mask_storeu_epi32(out + p * 2 * lanes, first_lanes(lanes), r[p]);
    }
  }
}

// Prefill's weight rows per unit (unit_rows): all of them paired into scratch at once.
constexpr int64_t prefill_unit_rows = 256;

// Per-thread scratch (matmul.cpp hands it out), in bf16 elements: decode's 32 weight rows
// zero-padded to whole tiles (pad_weights), or prefill's whole unit as column-pair tiles
// (pair_weights: 8 blocks of 32 rows, 1.5 MB for 3072 columns).
size_t scratch_elems(int64_t n, int64_t cols) {
  const int64_t blocks = prefill_layout(n) ? prefill_unit_rows / 32 : 1;
  return static_cast<size_t>(blocks * blocks_of(cols) * 2 * tile_elems);
}

// The fp32 tile `acc` (16 weight rows x 16 activation rows) into y: activation row t of the tile
// goes to y[t][0 .. live_w) (y row stride ldy), for t < live_x.
void store_tile(const float* acc, float* y, int64_t ldy, int64_t live_w, int64_t live_x) {
  __m512i r[16];
  for (int m = 0; m < 16; ++m) r[m] = _mm512_load_si512(acc + m * 16);
  transpose16x16_epi32(r);
  const __mmask16 keep = first_lanes(live_w);
  for (int64_t t = 0; t < live_x; ++t) _mm512_mask_storeu_ps(y + t * ldy, keep, _mm512_castsi512_ps(r[t]));
}

// kPrefetch (decode: the weights stream from DRAM once): each of the block's 16 weight rows 512 B
// ahead and, past the row's end, the same row of the next block. Measured on a Sapphire Rapids
// class Xeon (lm_head, one core): 12.3 GB/s without, 13.4-14.4 with, 14.7-14.9 for the f32 path.
// 512 bytes rather than 1 KB: the 0.6B shape's bf16 batch 1, weights on 2 MB pages, 17.6-17.8
// against 16.4-17.7 tok/s (three alternated pairs); 256 B and 2 KB read less in the layers' matmuls.
constexpr int64_t prefetch_ahead = 512;

// Where a block's weight tiles are: tile (t, b) of weight rows 16t.. and columns 32b.. starts at
// a + t * second + b * step, its rows `stride` bytes apart.
struct weight_tiles {
  const uint16_t* a;
  int64_t stride, step, second;
};

// Decode's 16/32 weight rows (wt) x 16/32 activation rows (xg: one or two groups of column-pair
// tiles, the second nb * P tiles further on) over all nb column blocks, into out (4 tiles of
// weight rows x activation rows, 256 floats apart). Per block the P planes go in order.
// span: elements per activation tile, ldb: bytes per tile row (x_tile_elems, narrow_lanes).
template <bool kTwoW, bool kTwoX, bool kPrefetch = false, int P = 1>
void block(const weight_tiles& wt, const uint16_t* xg, int64_t nb, float* out, int64_t span, int64_t ldb) {
  _tile_zero(0);
  if constexpr (kTwoX) _tile_zero(1);
  if constexpr (kTwoW) _tile_zero(2);
  if constexpr (kTwoW && kTwoX) _tile_zero(3);
  const uint16_t* a = wt.a;
  const uint16_t* a1 = a + wt.second;
  const int64_t stride = wt.stride, step = wt.step;
  const uint16_t* x1 = xg + nb * P * span;
  const char* pa = reinterpret_cast<const char*>(a);
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kPrefetch) {  // rows in place (row-major): stride is the row's bytes
      constexpr int rows = kTwoW ? 32 : 16;  // kTwoW: the second tile's rows follow the first's
      int64_t ahead = b * 64 + prefetch_ahead;
      if (ahead >= stride) ahead += (rows - 1) * stride;
#pragma GCC unroll 32
      for (int r = 0; r < rows; ++r) _mm_prefetch(pa + r * stride + ahead, _MM_HINT_T0);
    }
    // Every load first, then the products: the loads of a step overlap (measured 652 -> 705
    // GFLOP/s on one core against load, product, load, product).
    const uint16_t* xs = xg + b * P * span;
    const uint16_t* xs1 = x1 + b * P * span;
    _tile_loadd(4, a + b * step, stride);
    if constexpr (P == 3 && !kTwoW && !kTwoX) {  // one accumulator: the three planes in tiles 6, 7, 5
      _tile_loadd(6, xs, ldb);
      _tile_loadd(7, xs + span, ldb);
      _tile_loadd(5, xs + 2 * span, ldb);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(0, 4, 7);
      _tile_dpbf16ps(0, 4, 5);
      continue;
    }
    if constexpr (kTwoW) _tile_loadd(5, a1 + b * step, stride);
#pragma GCC unroll 3
    for (int q = 0; q < P; ++q) {
      _tile_loadd(6, xs + q * span, ldb);
      if constexpr (kTwoX) _tile_loadd(7, xs1 + q * span, ldb);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (kTwoX) _tile_dpbf16ps(1, 4, 7);
      if constexpr (kTwoW) _tile_dpbf16ps(2, 5, 6);
      if constexpr (kTwoW && kTwoX) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, out, 64);
  if constexpr (kTwoX) _tile_stored(1, out + 256, 64);
  if constexpr (kTwoW) _tile_stored(2, out + 512, 64);
  if constexpr (kTwoW && kTwoX) _tile_stored(3, out + 768, 64);
}

// Decode (one activation group) streams a unit's rows once, 16 rows a block: 16 concurrent row
// streams read faster than 32 (lm_head on one core, 12.8 vs 11.7 GB/s). Larger batches use each
// 32-row block for every activation group (pair), in units small enough to share out.
// Prefill: 256-row units, their weights paired once into scratch and swept by each activation
// group pair in turn (run_prefill).
int64_t unit_rows(int64_t n) { return n <= group_rows ? 256 : prefill_layout(n) ? prefill_unit_rows : 64; }

// Decode: a block's weight rows [j, j + live) zero-padded to whole tiles where they cannot be read
// in place (the matrix's last rows, or cols that are not a multiple of 32: a direct load would read
// past the matrix or mix in the next row).
weight_tiles pad_weights(const uint16_t* wd, int64_t cols, int64_t j, int64_t live, int64_t tile_rows, int64_t nb,
                         uint16_t* p) {
  const int64_t ldp = nb * kblock;
  std::memset(p, 0, static_cast<size_t>(tile_rows * ldp) * 2);
  for (int64_t r = 0; r < live; ++r) std::memcpy(p + r * ldp, wd + (j + r) * cols, static_cast<size_t>(cols) * 2);
  return {p, ldp * 2, kblock, 16 * ldp};
}

// Prefill: a 32-row block's weights as column-pair tiles (tile (t, b) row p lane r = weight row
// j + 16t + r's columns 32b + 2p, 32b + 2p + 1), each 1 KB of its own, zero past live rows and
// cols, written to p. Copied once per unit (run_prefill) and loaded once per activation group pair;
// the transpose is what lets the products land as y's rows (activation row x weight row), stored
// without one.
void pair_weights(const uint16_t* wd, int64_t cols, int64_t j, int64_t live, int64_t nb, uint16_t* p) {
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      __m512i r[16];
      load_rows<false>(wd + (j + 16 * t) * cols + b * kblock, cols, std::max<int64_t>(0, live - 16 * t),
                       std::min<int64_t>(kblock, cols - b * kblock), r);
      transpose16x16_epi32(r);
      uint16_t* out = p + (t * nb + b) * tile_elems;
      for (int q = 0; q < 16; ++q) _mm512_store_si512(out + q * 32, r[q]);
    }
}

// Prefill's 32 activation rows (groups g, g + 1: tiles xg, xg + nb * P tiles) x 32 weight rows
// (wp, wp + nb tiles) over all nb column blocks, into c[0] (rows of g x weights 0-15), c[1] (g x
// 16-31), c[2] (g + 1 x 0-15), c[3] (g + 1 x 16-31): y's own layout. Per block the P planes go in
// order, as in block().
template <bool kTwoX, int P = 1>
void block_rows(const uint16_t* xg, const uint16_t* wp, int64_t nb, float (*c)[256]) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwoX) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint16_t* x1 = xg + nb * P * tile_elems;
  const uint16_t* w1 = wp + nb * tile_elems;
  for (int64_t b = 0; b < nb; ++b) {
    const uint16_t* xs = xg + b * P * tile_elems;
    const uint16_t* xs1 = x1 + b * P * tile_elems;
    _tile_loadd(4, xs, 64);
    _tile_loadd(6, wp + b * tile_elems, 64);
    _tile_loadd(7, w1 + b * tile_elems, 64);
#pragma GCC unroll 3
    for (int q = 0; q < P; ++q) {
      if (q > 0) _tile_loadd(4, xs + q * tile_elems, 64);
      if constexpr (kTwoX) _tile_loadd(5, xs1 + q * tile_elems, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if constexpr (kTwoX) {
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  if constexpr (kTwoX) {
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
  }
}

// A 16 x 16 fp32 tile in y's layout (row t = activation row) into y, t < live_x, columns < live_w.
void store_rows(const float* c, float* y, int64_t ldy, int64_t live_w, int64_t live_x) {
  const __mmask16 keep = first_lanes(live_w);
  for (int64_t t = 0; t < live_x; ++t) _mm512_mask_storeu_ps(y + t * ldy, keep, _mm512_load_ps(c + t * 16));
}

// Prefill over a unit of weight rows: its 32-row blocks paired into scratch first, then each
// activation group pair sweeps them all, so a pair's tiles (3 planes: 6 KB a 32-column block)
// come from memory once per unit and from L2 for its other blocks. Pairing one block at a time
// and sweeping every group over it read all of x once per 32 weight rows (3 MB for the 0.6B
// shape's 512-row prompt with three planes, past L2): 0.6B prefill matmuls n = 512, f32 on the
// tiles 807-818 -> 476-490 ms (64-row units 601-655, 128 531-547, 512 472-492), bf16 mode 300-310
// -> 259 ms.
template <int P>
void run_prefill(const uint16_t* xb, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y,
                 uint16_t* scratch) {
  const auto* wd = static_cast<const uint16_t*>(w.data);
  const int64_t cols = w.cols, ldy = w.rows, nb = blocks_of(cols);
  const int64_t groups = (n + group_rows - 1) / group_rows;
  alignas(64) float c[4][256];
  const int64_t pair_elems = 2 * nb * tile_elems;
  for (int64_t j = j0; j < j1; j += 32)
    pair_weights(wd, cols, j, std::min<int64_t>(32, j1 - j), nb, scratch + (j - j0) / 32 * pair_elems);
  for (int64_t g = 0; g < groups; g += 2) {
    const bool two_x = g + 1 < groups;
    const uint16_t* xg = xb + g * nb * P * tile_elems;
    for (int64_t j = j0; j < j1; j += 32) {
      const int64_t live = std::min<int64_t>(32, j1 - j);
      const uint16_t* wp = scratch + (j - j0) / 32 * pair_elems;
      const int64_t live_w0 = std::min<int64_t>(16, live), live_w1 = live - live_w0;
      if (two_x) block_rows<true, P>(xg, wp, nb, c);
      else block_rows<false, P>(xg, wp, nb, c);
      for (int h = 0; h < (two_x ? 2 : 1); ++h) {
        const int64_t x0 = (g + h) * group_rows, live_x = std::min<int64_t>(group_rows, n - x0);
        store_rows(c[2 * h], y + x0 * ldy + j, ldy, live_w0, live_x);
        if (live_w1 > 0) store_rows(c[2 * h + 1], y + x0 * ldy + j + 16, ldy, live_w1, live_x);
      }
    }
  }
}

template <int P>
void run(const uint16_t* xb, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, uint16_t* scratch) {
  if (prefill_layout(n)) {
    configure_amx_tiles();
    return run_prefill<P>(xb, n, w, j0, j1, y, scratch);
  }
  const int64_t lanes = narrow_lanes(n), span = x_tile_elems(n), ldb = 4 * lanes;
  _tile_loadconfig(&config_for(lanes));
  const auto* wd = static_cast<const uint16_t*>(w.data);
  const int64_t cols = w.cols, ldy = w.rows, nb = blocks_of(cols);
  const int64_t groups = (n + group_rows - 1) / group_rows;  // 1 or 2
  alignas(64) float acc[4][256] = {};  // narrow tiles leave lanes unwritten: read as zeros
  const int64_t step = groups == 1 ? 16 : 32;
  for (int64_t j = j0; j < j1; j += step) {
    const int64_t live = std::min<int64_t>(step, j1 - j);
    const bool two_w = live > 16;
    // In place, loads read 16 or 32 whole rows of whole tiles: those past the unit belong to another
    // unit (their outputs are not stored), so only the matrix's end and ragged cols need a copy.
    const int64_t tile_rows = two_w ? 32 : 16;
    const weight_tiles wt = cols % kblock != 0 || j + tile_rows > w.rows
                                ? pad_weights(wd, cols, j, live, tile_rows, nb, scratch)
                                : weight_tiles{wd + j * cols, cols * 2, kblock, 16 * cols};
    const bool two_x = groups == 2;
    // One group takes 16-row blocks (two_w never), two groups 32-row ones (two_x always).
    if (two_w && wt.stride == cols * 2) block<true, true, true, P>(wt, xb, nb, acc[0], span, ldb);
    else if (two_w) block<true, true, false, P>(wt, xb, nb, acc[0], span, ldb);
    else if (two_x) block<false, true, false, P>(wt, xb, nb, acc[0], span, ldb);
    else if (wt.stride == cols * 2) block<false, false, true, P>(wt, xb, nb, acc[0], span, ldb);
    else block<false, false, false, P>(wt, xb, nb, acc[0], span, ldb);
    const int64_t live_x0 = std::min<int64_t>(group_rows, n), live_w0 = std::min<int64_t>(16, live);
    store_tile(acc[0], y + j, ldy, live_w0, live_x0);
    if (two_x) store_tile(acc[1], y + 16 * ldy + j, ldy, live_w0, n - 16);
    if (two_w) {
      store_tile(acc[2], y + j + 16, ldy, live - 16, live_x0);
      if (two_x) store_tile(acc[3], y + 16 * ldy + j + 16, ldy, live - 16, n - 16);
    }
  }
}

}  // namespace

// The tile configuration is per thread state that other code on the thread may change or release
// (a probe, a library): loaded at every unit, a few dozen cycles against a unit's thousands.
void configure_amx_tiles() { _tile_loadconfig(&config_for(group_rows)); }

}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

// Built for the baseline ISA: matmul.cpp may call this on any CPU, then runs it only where
// amx_usable().
const matmul_bf16_backend& matmul_bf16_backend_amx() {
  static const matmul_bf16_backend b{"amx", unit_rows, run<1>, group_rows, xb_elems<1>, pack<1>, scratch_elems};
  return b;
}

const matmul_bf16_backend& matmul_f32_backend_amx() {
  static const matmul_bf16_backend b{"amx_bf16x3", unit_rows, run<3>, group_rows, xb_elems<3>, pack<3>, scratch_elems};
  return b;
}

bool amx_usable() {
  static const bool usable = [] {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
      return false;
    // GCC 12's __builtin_cpu_supports knows no AMX feature names: CPUID leaf 7 EDX bits 22 (AMX-BF16)
    // and 24 (AMX-TILE), and OSXSAVE with XCR0 bits 17/18 (XTILECFG / XTILEDATA) enabled by the OS.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
    if (!(edx & (1u << 22)) || !(edx & (1u << 24))) return false;
    __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(1), "c"(0));
    if (!(ecx & (1u << 27))) return false;  // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    // Linux (5.16+) hands out the 8 KB tile state only on request, once per process.
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
  }();
  return usable;
}

}  // namespace troupe::kernels::cpu
