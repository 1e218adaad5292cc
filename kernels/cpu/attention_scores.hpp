// The score loop of the SIMD attention back-ends (attention_avx512.cpp, attention_avx2.cpp), which
// was the same code in both: keys walked through the block table score_keys at a time, each group
// of keys scored against up to 3 queries per register tile, rows read in place from the pool
// prefetched score_ahead keys ahead. Include inside namespace troupe::kernels::cpu::{anonymous},
// after the back-end's target pragma and its
//   score_keys, score_ahead: keys per tile, keys prefetched ahead (a multiple of score_keys);
//   score_tile<R>(q, kp, d, scale, s, lds), R = 1, 2, 3: s[r * lds + c] = dot16(q[r], kp[c]) * scale
//     for c < score_keys (attention.hpp's arithmetic).
// score_keys must divide 8: a tile may write past a query's last key up to the next multiple of
// score_keys, and attention.hpp allows up to the next multiple of 8.
#pragma once

static_assert(8 % score_keys == 0 && score_ahead % score_keys == 0);

// Rows read in place from the pool lie kv.row floats apart (4 KB for 8 heads of 128): a few lines
// per page, which the hardware prefetchers do not follow, so decode read K and V at about half the
// bandwidth. Prefetching the rows ahead (software, all of each row) lets them stream.
inline void prefetch_row(const float* r, int64_t floats) {
  for (int64_t f = 0; f < floats; f += 16) _mm_prefetch(reinterpret_cast<const char*>(r + f), _MM_HINT_T0);
}

// Prefetches the rows `ahead` positions in front of a walk over keys [j0, j1), each from `off`
// for `floats`, with a cursor of its own: a kv_cursor built per key divided by the block size
// each time (an idiv per key in the weighted sum's inner loop).
struct row_prefetcher {
  kv_cursor cur;
  int64_t pos, end, off, floats;
  const float* base;
  row_prefetcher(const float* base_, const attn_kv& kv, int64_t j0, int64_t j1, int64_t ahead, int64_t off_,
                 int64_t floats_)
      : cur(kv, j0), pos(j0), end(j1), off(off_), floats(floats_), base(base_) {
    for (int64_t n = 0; n < ahead; ++n) advance();
  }
  // Prefetches the row at pos (while pos < end) and moves one key on.
  void advance() {
    if (pos >= end) return;
    prefetch_row(base + cur.at + off, floats);
    if (++pos < end) cur.next();
  }
};

void scores(const float* const* q, const int64_t* limit, int nq, const attn_kv& kv, float scale, float* s,
            int64_t lds) {
  if (nq <= 0) return;
  const int64_t end = limit[nq - 1];
  const bool strided = kv.row > kv.d;
  kv_cursor cur(kv, 0);
  const float* kp[score_keys];
  int first = 0;  // first query that still sees key j
  row_prefetcher ahead(kv.k, kv, 0, strided ? end : 0, score_ahead, 0, kv.d);
  for (int64_t j = 0; j < end; j += score_keys) {
    // Keys past `end` repeat the last one: valid memory, their scores are never read.
    for (int c = 0; c < score_keys; ++c) {
      kp[c] = kv.k + cur.at;
      if (j + c + 1 < end) cur.next();
    }
    for (int c = 0; c < score_keys; ++c) ahead.advance();
    while (limit[first] <= j) ++first;
    int i = first;
    for (; i + 3 <= nq; i += 3) score_tile<3>(q + i, kp, kv.d, scale, s + i * lds + j, lds);
    if (nq - i == 2) score_tile<2>(q + i, kp, kv.d, scale, s + i * lds + j, lds);
    if (nq - i == 1) score_tile<1>(q + i, kp, kv.d, scale, s + i * lds + j, lds);
  }
}
