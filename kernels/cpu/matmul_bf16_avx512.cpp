// bf16-mode matmul back-end (matmul_bf16.hpp) on AVX512_BF16: one vdpbf16ps per 32 columns of an
// activation row and a weight row, the bf16 weights used straight from the checkpoint (no widening,
// no packing). R x 8 register tiles (R <= 3 activation rows, 8 weight rows) over the whole k range,
// then matmul's reduction tree; activation rows in blocks of 60 so they stay in L2 while a unit's
// weights are reused from L1/L2.
// NOTE: on the dev machine (Xeon, Sapphire Rapids class) vdpbf16ps zmm issues once per ~2 cycles,
// i.e. 32 multiply-adds per 2 cycles against 2 x 16 per cycle for the fp32 FMA: this mode is not
// faster than f32 there for compute-bound shapes (docs/kernels.md, "bf16 compute").
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_bf16.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,bmi,bmi2")

namespace troupe::kernels::cpu {
namespace {  // internal linkage: no AVX-512 code can leak into other units through COMDAT folding

#include "kernels/cpu/avx512_tree.hpp"  // reduce16 / reduce8 / store_tile: matmul's tree, many accumulators at once
#include "kernels/cpu/row_prefetch.hpp"  // the next tile's rows, a few lines per k step

constexpr int tile_cols = 8;      // weight rows per tile
constexpr int max_tile_rows = 3;  // 24 accumulators + 3 x + 1 w of the 32 zmm registers
constexpr int direct_max_n = 3;   // decode: one tile row group, weights streamed with prefetch
constexpr int unit_rows_packed = 48;
constexpr int64_t block_n = 60;   // activation rows per block: 60 x 3072 x 2 B = 360 KB in L2


inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// One R x 8 tile: xb rows (stride ldx, zero-padded to 32) against the 8 weight rows `rows`, all of
// w.cols; output c goes to y[c * ystride]. kPrefetch (decode): each row 512 B ahead and, past its
// end, the same row of the next tile, `jump_rows` rows further on, as matmul_avx512.cpp's decode
// does. pf: other rows to pull toward L2 meanwhile.
template <int R, bool kPrefetch>
void tile(const uint16_t* xb, int64_t ldx, const uint16_t* const* rows, int64_t cols, float* y, int64_t ldy,
          int live, row_prefetch& pf, int64_t jump_rows = tile_cols - 1, int64_t ystride = 1) {
  constexpr int C = tile_cols;
  __m512 acc[R * C];
#pragma GCC unroll 24
  for (int i = 0; i < R * C; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t full = cols / 32 * 32, row_bytes = cols * 2;
  for (int64_t k = 0; k < full; k += 32) {
    pf.step();
    if constexpr (kPrefetch) {
      const int64_t ahead = k * 2 + 512;
      const int64_t jump = ahead >= row_bytes ? jump_rows * row_bytes : 0;
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(rows[c]) + ahead + jump, _MM_HINT_T0);
    }
    __m512bh xv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) xv[r] = as_bh(_mm512_loadu_si512(xb + r * ldx + k));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512bh wv = as_bh(_mm512_loadu_si512(rows[c] + k));
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_dpbf16_ps(acc[r * C + c], xv[r], wv);
    }
  }
  if (full < cols) {  // the tail: x is zero-padded in memory, w is masked (never read past the matrix)
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (cols - full)) - 1);
    __m512bh xv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) xv[r] = as_bh(_mm512_loadu_si512(xb + r * ldx + full));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512bh wv = as_bh(_mm512_maskz_loadu_epi16(m, rows[c] + full));
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm512_dpbf16_ps(acc[r * C + c], xv[r], wv);
    }
  }
  if (ystride == 1) {
    store_tile<R>(acc, y, ldy, live);
  } else {  // decode's page-apart rows (run): a tile's outputs are ystride apart
    alignas(64) float out[R * C];
    store_tile<R>(acc, out, C, C);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) y[r * ldy + c * ystride] = out[r * C + c];
  }
}

// Rows past the unit's last repeat it: valid memory, outputs never stored.
void tile_rows(const uint16_t* w, int64_t cols, int64_t j, int live, const uint16_t** rows) {
  for (int c = 0; c < tile_cols; ++c) rows[c] = w + (j + std::min(c, live - 1)) * cols;
}

template <bool kPrefetch>
void tile_any(int r, const uint16_t* xb, int64_t ldx, const uint16_t* const* rows, int64_t cols, float* y,
              int64_t ldy, int live, row_prefetch& pf, int64_t jump_rows = tile_cols - 1, int64_t ystride = 1) {
  switch (r) {
    case 3: return tile<3, kPrefetch>(xb, ldx, rows, cols, y, ldy, live, pf, jump_rows, ystride);
    case 2: return tile<2, kPrefetch>(xb, ldx, rows, cols, y, ldy, live, pf, jump_rows, ystride);
    default: return tile<1, kPrefetch>(xb, ldx, rows, cols, y, ldy, live, pf, jump_rows, ystride);
  }
}

// Decode streams 256 rows a unit, as the f32 back-end's decode (matmul_avx512.cpp): each new unit
// restarts the streams.
int64_t unit_rows(int64_t n) { return n <= direct_max_n ? 256 : unit_rows_packed; }

void run(const uint16_t* xb, int64_t n, const weight_ref& w, int64_t j0, int64_t j1, float* y, uint16_t*) {
  const auto* wd = static_cast<const uint16_t*>(w.data);
  const int64_t cols = w.cols, ldx = bf16_padded_cols(cols), ldy = w.rows;
  const uint16_t* rows[tile_cols];
  if (n <= direct_max_n) {
    // Rows shorter than a 4 KB page are tiled a page apart (rows_per_page, matmul_backend.hpp).
    const int64_t S = rows_per_page(cols * 2), span = tile_cols * S;
    int64_t j = j0;
    for (; S > 1 && j + span <= j1; j += span)
      for (int64_t s = 0; s < S; ++s) {
        for (int c = 0; c < tile_cols; ++c) rows[c] = wd + (j + s + c * S) * cols;
        row_prefetch none;
        tile_any<true>(static_cast<int>(n), xb, ldx, rows, cols, y + j + s, ldy, tile_cols, none, s + 1 < S ? 0 : span - S, S);
      }
    for (; j < j1; j += tile_cols) {
      const int live = static_cast<int>(std::min<int64_t>(tile_cols, j1 - j));
      tile_rows(wd, cols, j, live, rows);
      row_prefetch none;  // decode prefetches within its own rows
      tile_any<true>(static_cast<int>(n), xb, ldx, rows, cols, y + j, ldy, live, none);
    }
    return;
  }
  // A block of activation rows against every 8-row tile of the unit: the tile's rows come from
  // memory for the first row group, which prefetches ahead as decode does, and from L1/L2 for the
  // others, which meanwhile pull the next tile's rows (past this unit: the rows after it, which the
  // other thread is likely reading too) toward L2, so the next first group does not wait on DRAM.
  const int64_t row_bytes = cols * 2, steps = (cols + 31) / 32;
  for (int64_t ic = 0; ic < n; ic += block_n) {
    const int64_t ie = std::min(n, ic + block_n);
    const int64_t later_groups = (ie - ic - 1) / max_tile_rows;
    for (int64_t j = j0; j < j1; j += tile_cols) {
      const int live = static_cast<int>(std::min<int64_t>(tile_cols, j1 - j));
      tile_rows(wd, cols, j, live, rows);
      const int next_rows = static_cast<int>(std::clamp<int64_t>(w.rows - (j + tile_cols), 0, tile_cols));
      row_prefetch pf = next_rows > 0 ? make_prefetch(wd + (j + tile_cols) * cols, next_rows, row_bytes, row_bytes,
                                                      later_groups * steps)
                                        : row_prefetch{};
      row_prefetch none;
      for (int64_t i = ic; i < ie; i += max_tile_rows) {
        const int r = static_cast<int>(std::min<int64_t>(max_tile_rows, ie - i));
        if (i == ic)
          tile_any<true>(r, xb + i * ldx, ldx, rows, cols, y + i * ldy + j, ldy, live, none);
        else
          tile_any<false>(r, xb + i * ldx, ldx, rows, cols, y + i * ldy + j, ldy, live, pf);
      }
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

#pragma GCC pop_options

namespace troupe::kernels::cpu {

// Built for the baseline ISA: matmul.cpp may call this on any CPU, then runs it only with AVX512_BF16.
const matmul_bf16_backend& matmul_bf16_backend_avx512() {
  static const matmul_bf16_backend b{"avx512_bf16", unit_rows, run};
  return b;
}

}  // namespace troupe::kernels::cpu
