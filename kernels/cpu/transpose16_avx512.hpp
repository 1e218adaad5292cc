// A 16 x 16 transpose of 32-bit lanes in AVX-512 registers: r[i] lane j <-> r[j] lane i.
// Included inside an AVX-512 target region (AMX packing, AMX output tiles); no state, header only.
#pragma once

inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16];
  // Pairs of rows interleaved: t[2i] holds r[2i][4q+0], r[2i+1][4q+0], r[2i][4q+1], r[2i+1][4q+1]
  // in 128-bit lane q; t[2i+1] the same with columns 4q+2 and 4q+3.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // Quads of rows: r[4i + c] holds, in 128-bit lane q, column 4q + c of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // 128-bit lanes: t[c] = lanes 0, 2 of r[c] and r[c + 4] (rows 0-7, columns 4*{0,2}+c), t[c + 4]
  // lanes 1, 3; the same for rows 8-15 in t[8..15].
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c) {
      t[8 * h + c] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + c + 4], 0x88);
      t[8 * h + c + 4] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + c + 4], 0xdd);
    }
  // t[8h + c] lanes: (rows 8h+0..3, col c), (rows 8h+0..3, col 8+c), (rows 8h+4..7, col c),
  // (rows 8h+4..7, col 8+c); t[8h + c + 4] the same for columns 4+c and 12+c. Column j's four lane
  // groups: rows 0-3, 4-7 from t[j'] and rows 8-15 from t[8 + j'].
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);            // column c: lanes 0, 2 of each
    r[c + 8] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);        // column 8 + c
    r[c + 4] = _mm512_shuffle_i32x4(t[c + 4], t[12 + c], 0x88);   // column 4 + c
    r[c + 12] = _mm512_shuffle_i32x4(t[c + 4], t[12 + c], 0xdd);  // column 12 + c
  }
}
