// Software prefetch of the weight rows a matmul reads next, spread over the k steps of the tiles
// that run before them (shared by the AVX-512 f32 and bf16-compute back-ends). Include it inside an
// anonymous namespace of a unit that includes <immintrin.h>.
#pragma once

// Pulls the next sub-panel's weight rows toward L2 while the current one computes, a few lines per
// k step: issued in a burst they would exhaust the line-fill buffers and stall the FMAs, and
// without them the first tile of each sub-panel waits on DRAM (batched decode).
struct row_prefetch {
  const char* p = nullptr;        // next line to fetch
  const char* row_end = nullptr;  // end of the current row's piece
  int64_t piece = 0, stride = 0;  // bytes per row piece, bytes between rows
  int rows_left = 0, per_trigger = 1, period = 1, countdown = 1;

  void step() {
    if (rows_left == 0 || --countdown > 0) return;
    countdown = period;
    for (int i = 0; i < per_trigger && rows_left > 0; ++i) {
      _mm_prefetch(p, _MM_HINT_T1);
      p += 64;
      if (p >= row_end) {
        row_end += stride;
        p = row_end - piece;
        --rows_left;
      }
    }
  }
};

// Prefetch `rows` rows of `piece` bytes (at `stride`) over `steps` k steps.
inline row_prefetch make_prefetch(const void* first, int rows, int64_t piece, int64_t stride, int64_t steps) {
  row_prefetch f;
  if (rows <= 0 || piece <= 0) return f;
  const int64_t lines = rows * ((piece + 63) / 64);
  f.p = static_cast<const char*>(first);
  f.row_end = f.p + piece;
  f.piece = piece, f.stride = stride, f.rows_left = rows;
  f.per_trigger = static_cast<int>(std::max<int64_t>(1, (lines + steps - 1) / std::max<int64_t>(steps, 1)));
  f.period = static_cast<int>(std::max<int64_t>(1, steps / lines));
  f.countdown = f.period;
  return f;
}
