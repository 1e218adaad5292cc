// CPU element-wise, norm, RoPE, embedding and paged-attention kernels (kernels/kernels.hpp).
// Reductions use explicit 16-lane partial sums combined in a fixed order, so results do not
// depend on the vector width the compiler picks, on threads, or on batch composition.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <omp.h>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/kv_quant.hpp"
#include "kernels/cpu/vec_math.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

#define TROUPE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace troupe::kernels {
namespace {

using cpu::attn_kv;
using cpu::kv_cursor;

constexpr int kLanes = 16;

// Dot product with kLanes partial sums and a fixed pairwise combine.
TROUPE_CLONES float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

TROUPE_CLONES void widen_row(const void* src, dtype t, int64_t n, float* out) {
  switch (t) {
    case dtype::f32: std::memcpy(out, src, n * sizeof(float)); return;
    case dtype::bf16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(s[i]);
      return;
    }
    case dtype::f16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(s[i]);
      return;
    }
    default: throw_error(errc::unsupported, "embedding: unsupported table dtype " + std::string(to_string(t)));
  }
}

// Rows [0, n) of one block of a quantized pool, kv heads [g0, g1), into `out` laid out as the float
// pool would be but with (g1 - g0) heads per slot (cpu::dequantize_kv_row per row, vectorised for
// the best instruction set here; FP8 by F16C where the CPU has AVX2, the same bits), so attention
// on `out` is attention on the stored values.
using fp8_row_fn = void (*)(const uint8_t* codes, float scale, int64_t n, float* out);
TROUPE_CLONES void fp8_row_generic(const uint8_t* codes, float scale, int64_t n, float* out) {
  cpu::dequantize_kv_row(codes, scale, n, dtype::f8_e4m3, out);
}

TROUPE_CLONES void dequantize_block(const uint8_t* codes, const float* scales, int64_t n, int64_t n_kv_heads, int64_t g0,
                                    int64_t g1, int64_t d, dtype type, fp8_row_fn fp8_row, float* out) {
  for (int64_t slot = 0; slot < n; ++slot)
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t at = slot * n_kv_heads + g;
      float* row = out + (slot * (g1 - g0) + (g - g0)) * d;
      if (type == dtype::f8_e4m3)
        fp8_row(codes + at * d, scales[at], d, row);
      else
        cpu::dequantize_kv_row(codes + at * d, scales[at], d, type, row);
    }
}

}  // namespace

// Element-wise kernels split rows over the OpenMP threads once there is enough work (~64k
// floats): a row's arithmetic never depends on the split. Below that, waking threads costs more.
namespace {

constexpr int64_t kParallelFloats = int64_t{1} << 16;

TROUPE_CLONES void rmsnorm_row(const float* xr, const float* weight, int64_t dim, float eps, float* o) {
  float ss = dot_lanes(xr, xr, dim);
  float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * weight[i];
}

// cos/sin of every (position, frequency) of the last call, per thread: a step calls rope twice per
// layer with the same positions, and sin/cos in double dominated rope.
struct rope_table {
  std::vector<int32_t> positions;
  std::vector<float> inv_freq, cs, sn;
  float scale = 1.0f;
};

const rope_table& rope_angles(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                              float scale) {
  thread_local rope_table tab;
  if (tab.positions.size() == static_cast<size_t>(n) && tab.inv_freq.size() == static_cast<size_t>(half) &&
      tab.scale == scale && std::equal(positions, positions + n, tab.positions.begin()) &&
      std::equal(inv_freq, inv_freq + half, tab.inv_freq.begin()))
    return tab;
  tab.positions.assign(positions, positions + n);
  tab.inv_freq.assign(inv_freq, inv_freq + half);
  tab.scale = scale;
  tab.cs.resize(static_cast<size_t>(n * half));
  tab.sn.resize(tab.cs.size());
  // NOTE: `tab` is thread_local: the OpenMP workers write through these pointers, not their own `tab`.
  float* const cs = tab.cs.data();
  float* const sn = tab.sn.data();
#pragma omp parallel for schedule(static) if (n * half >= 4096)
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < half; ++i) {
      // NOTE: angle in double then rounded: float32 pos*inv_freq loses digits at long context.
      double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
      cs[t * half + i] = static_cast<float>(std::cos(angle) * scale);
      sn[t * half + i] = static_cast<float>(std::sin(angle) * scale);
    }
  return tab;
}

TROUPE_CLONES void rope_token(float* x, int64_t n_heads, int64_t head_dim, const float* cs, const float* sn) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

// The instruction set of the attention and SiLU loops: the one matmul chose (matmul.cpp), so one
// TROUPE_ISA setting moves every kernel together.
enum class isa { generic, avx2, avx512 };
isa kernel_isa() {
  static const isa chosen = [] {
    const std::string_view m = matmul_isa();
    return m == "avx512" ? isa::avx512 : m == "avx2" ? isa::avx2 : isa::generic;
  }();
  return chosen;
}

}  // namespace

namespace cpu {
TROUPE_CLONES void silu_mul_generic(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + exp_approx(-g)) * up[i];
  }
}
}  // namespace cpu

void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
#pragma omp parallel for schedule(static) if (n * dim >= kParallelFloats && n > 1)
  for (int64_t r = 0; r < n; ++r) rmsnorm_row(x + r * dim, weight, dim, eps, out + r * dim);
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq, float scale) {
  const int64_t half = head_dim / 2;
  const rope_table& tab = rope_angles(positions, n_tokens, inv_freq, half, scale);
  const float* cs = tab.cs.data();
  const float* sn = tab.sn.data();
#pragma omp parallel for schedule(static) if (n_tokens * n_heads * head_dim >= kParallelFloats && n_tokens > 1)
  for (int64_t t = 0; t < n_tokens; ++t)
    rope_token(x + t * n_heads * head_dim, n_heads, head_dim, cs + t * half, sn + t * half);
}

void silu_mul(const float* gate, const float* up, int64_t count, float* out) {
  constexpr int64_t chunk = 4096;
  const int64_t chunks = (count + chunk - 1) / chunk;
  static const auto body = kernel_isa() == isa::avx512 ? cpu::silu_mul_avx512
                            : kernel_isa() == isa::avx2 ? cpu::silu_mul_avx2
                                                        : cpu::silu_mul_generic;
#pragma omp parallel for schedule(static) if (count >= kParallelFloats)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * chunk;
    body(gate + i0, up + i0, std::min(chunk, count - i0), out + i0);
  }
}

void embedding(const weight_ref& table, const int32_t* ids, int64_t n, float* out) {
  const size_t row_bytes = static_cast<size_t>(table.cols) * dtype_size(table.type);
  for (int64_t r = 0; r < n; ++r) {
    TROUPE_ASSERT(ids[r] >= 0 && ids[r] < table.rows);
    widen_row(static_cast<const uint8_t*>(table.data) + row_bytes * ids[r], table.type, table.cols,
              out + r * table.cols);
  }
}

void kv_write(const paged_kv_layer& kv, const int32_t* block_table, int32_t start_pos, int64_t n,
              const float* k, const float* v) {
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim;
  for (int64_t t = 0; t < n; ++t) {
    int64_t pos = start_pos + t;
    int64_t block = block_table[pos / kv.block_size];
    int64_t slot = block * kv.block_size + pos % kv.block_size;
    if (kv.type != dtype::f32) {  // quantized pool: each (token, head) row with its own scale
      for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t at = slot * kv.n_kv_heads + h;
        kv.k_scales[at] = cpu::quantize_kv_row(k + t * row + h * kv.head_dim, kv.head_dim, kv.type, kv.k_codes + at * kv.head_dim);
        kv.v_scales[at] = cpu::quantize_kv_row(v + t * row + h * kv.head_dim, kv.head_dim, kv.type, kv.v_codes + at * kv.head_dim);
      }
      continue;
    }
    std::memcpy(kv.k + slot * row, k + t * row, row * sizeof(float));
    std::memcpy(kv.v + slot * row, v + t * row, row * sizeof(float));
  }
}

namespace {

// The portable attention back-end (attention.hpp): the same fused multiply-adds, lane by lane, in
// the same order as the AVX-512 one. Cloned per ISA so std::fma is one instruction where it can be.
TROUPE_CLONES void scores_generic(const float* const* q, const int64_t* limit, int nq, const attn_kv& kv, float scale,
                                  float* s, int64_t lds) {
  if (nq <= 0) return;
  kv_cursor cur(kv, 0);
  int first = 0;
  for (int64_t j = 0; j < limit[nq - 1]; ++j) {
    if (j > 0) cur.next();
    while (limit[first] <= j) ++first;
    const float* kr = kv.k + cur.at;
    for (int i = first; i < nq; ++i) {
      float acc[kLanes] = {};
      for (int64_t b = 0; b < kv.d; b += kLanes)
        for (int l = 0; l < kLanes && b + l < kv.d; ++l) acc[l] = std::fma(q[i][b + l], kr[b + l], acc[l]);
      for (int w = kLanes / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
      s[i * lds + j] = acc[0] * scale;
    }
  }
}

TROUPE_CLONES void weighted_sum_generic(const float* p, int64_t lds, const int64_t* limit, int nq, const attn_kv& kv,
                                        float* const* out, bool resume) {
  for (int i = 0; i < nq; ++i) {
    float* o = out[i];
    if (!resume)
      for (int64_t x = 0; x < kv.d; ++x) o[x] = 0.0f;
    if (limit[i] == 0) continue;
    kv_cursor cur(kv, 0);
    for (int64_t j = 0;;) {
      const float pj = p[i * lds + j];
      const float* vr = kv.v + cur.at;
      for (int64_t x = 0; x < kv.d; ++x) o[x] = std::fma(pj, vr[x], o[x]);
      if (++j == limit[i]) break;
      cur.next();
    }
  }
}

// Softmax of one query's scores in place: max, exp, a 16-lane sum with the fixed tree, e / sum.
TROUPE_CLONES void softmax_generic(float* s, int64_t n) {
  float mx = -INFINITY;
  for (int64_t t = 0; t < n; ++t) mx = s[t] > mx ? s[t] : mx;
  float lanes[kLanes] = {};
  for (int64_t t = 0; t < n; ++t) {
    s[t] = cpu::exp_approx(s[t] - mx);
    lanes[t % kLanes] += s[t];
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  const float inv = 1.0f / lanes[0];
  for (int64_t k = 0; k < n; ++k) s[k] *= inv;
}

const cpu::attn_backend& choose_attn_backend() {
  switch (kernel_isa()) {
    case isa::avx512: return cpu::attn_backend_avx512();
    case isa::avx2: return cpu::attn_backend_avx2();
    default: return cpu::attn_backend_generic();
  }
}

}  // namespace

void paged_attention(const float* q, int64_t n_q, int64_t n_heads, int32_t start_pos,
                     const paged_kv_layer& kv, const int32_t* block_table, float scale, float* out) {
  const bool decode = n_q == 1 && kv.n_kv_heads > 1;  // the decode path below (quantized pools too)
  // AVX2 and AVX-512 CPUs have F16C (matmul_isa() requires it with AVX2).
  static const fp8_row_fn fp8_row = kernel_isa() == isa::generic ? fp8_row_generic : cpu::dequantize_fp8_avx2;
  // Work items: (kv head, block of up to 16 tokens). The group's query heads of those tokens share
  // every K and V row they read; each (token, head) still gets the arithmetic of attention.hpp alone.
  static const cpu::attn_backend& be = choose_attn_backend();
  const int64_t d = kv.head_dim;
  const int64_t group = n_heads / kv.n_kv_heads;
  const int64_t n_keys_max = start_pos + n_q;
  // Tokens per item: 16, fewer when the scores would outgrow ~512 KB (long contexts).
  const int64_t tb = std::clamp<int64_t>((int64_t{1} << 17) / std::max<int64_t>(1, group * n_keys_max), 1, 16);
  const int64_t blocks = (n_q + tb - 1) / tb, items = blocks * kv.n_kv_heads;
  // + 16: the garbage a score tile may write past a query's keys (attention.hpp) stays in its row.
  const int64_t lds = (n_keys_max + 15) / 16 * 16 + 16;
  // A prompt chunk reads each K/V row of a head from every item of that head. In the pool the rows
  // of one head lie 4 KB apart (n_kv_heads * head_dim floats): they alias in L1 and the prefetchers
  // do not follow them, and a layer's K and V outgrow L2. So each thread copies a head's keys into a
  // contiguous buffer once and runs all of that head's items on it (static chunks of whole heads).
  // The values are the same, so is every result. Decode (few queries per row read) reads in place.
  // A quantized pool's prompt chunk always gathers, dequantising each head's keys and values into
  // the same buffers: the float attention then runs on exactly the stored values. (It dequantised
  // the whole pool into a float copy first, pool-sized writes and reads for every chunk: with an
  // INT8 cache a chunk of 8 tokens after 3,000 keys wrote and read back 25 MB a layer.)
  const bool quantized = kv.type != dtype::f32;
  const bool gather = quantized || (n_q >= 16 && kv.n_kv_heads > 1);
  static const int32_t zero_table[1] = {0};
  const int64_t kr = std::max<int64_t>(1, 32 / kv.block_size) * kv.block_size;  // whole pool blocks, >= 32 keys
  auto run_item = [&](int64_t g, int64_t blk, const cpu::attn_kv& a, float* s, const float** qs, float** outs,
                      int64_t* limit, int64_t* range_limit) {
    const int64_t t0 = blk * tb, t1 = std::min(n_q, t0 + tb);
    int nq = 0;
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = g * group; h < (g + 1) * group; ++h, ++nq) {
        qs[nq] = q + (t * n_heads + h) * d;
        outs[nq] = out + (t * n_heads + h) * d;
        limit[nq] = start_pos + t + 1;
      }
    // Scores in one call over all keys: the score loop is key-major (attention_scores.hpp: each
    // group of keys meets every query before the next group is read), and one call lets its row
    // prefetch run on across what were range boundaries, where each range began with a burst of
    // misses (8 queries at 3,000 keys: -15% a layer on the AVX2 EPYC).
    be.scores(qs, limit, nq, a, scale, s, lds);
    // Weighted sums in ranges of kr keys: every query of the item sums a range's V rows while they
    // sit in L1/L2. One call over all keys made a pass over the whole context per tile of queries
    // (32 for V at 16 rows of 128 on AVX-512), from L3 or DRAM once the context outgrows L2: a
    // prompt token at 3,000 keys cost 3x a short one (docs/benchmarks.md, Serving). The order of
    // each sum is unchanged (attention.hpp, `resume`).
    const int64_t end = limit[nq - 1];
    auto each_range = [&](auto&& fn) {
      int first = 0;  // first query that still sees key j0
      for (int64_t j0 = 0; j0 < end; j0 += kr) {
        while (limit[first] <= j0) ++first;
        for (int i = first; i < nq; ++i) range_limit[i] = std::min(limit[i] - j0, kr);
        fn(j0, first, a.table == zero_table ? cpu::attn_kv{a.k + j0 * a.row, a.v + j0 * a.row, zero_table, a.block_size, a.row, 0, d}
                                            : cpu::attn_kv{a.k, a.v, a.table + j0 / a.block_size, a.block_size, a.row, a.offset, d});
      }
    };
    for (int i = 0; i < nq; ++i) be.softmax(s + i * lds, limit[i]);
    each_range([&](int64_t j0, int first, const cpu::attn_kv& r) {
      be.weighted_sum(s + first * lds + j0, lds, range_limit + first, nq - first, r, outs + first, j0 > 0);
    });
  };
  // Decode (one query token): an item is a range of kv heads, walked one KV block of keys at a
  // time through all of its heads. A slot holds the rows of every head side by side, so each block
  // is read as one contiguous piece per item instead of one 512-byte row per 4 KB per head. Per
  // (query, head) the arithmetic is unchanged: a score per key, one softmax over all of them, and
  // the weighted sum chained over the blocks in key order (attention.hpp, `resume`).
  // A quantized pool is dequantised here a block at a time, this item's heads only, K in the first
  // pass and V in the last, into a block-sized float buffer the same kernels read: one decode token
  // reads each code once and writes no pool-sized float copy (a whole-pool copy made an INT8
  // cache slower than a float one, and grew with the context). The values, and so every result,
  // are those dequantize_kv_row gives every path.
  if (decode) {
    const int64_t n_keys = start_pos + 1, bs = kv.block_size, row = static_cast<int64_t>(kv.n_kv_heads) * d;
    const int parts = static_cast<int>(std::min<int64_t>(kv.n_kv_heads, omp_get_max_threads()));
#pragma omp parallel for schedule(static) if (parts > 1)
    for (int part = 0; part < parts; ++part) {
      const int64_t g0 = kv.n_kv_heads * part / parts, g1 = kv.n_kv_heads * (part + 1) / parts;
      const int64_t nh = (g1 - g0) * group;  // query heads of this item, head g0 * group first
      thread_local std::vector<float> s;
      s.resize(static_cast<size_t>(nh * lds));
      std::vector<const float*> qs(nh);
      std::vector<float*> outs(nh);
      std::vector<int64_t> limit(group);
      for (int64_t h = 0; h < nh; ++h) {
        qs[h] = q + (g0 * group + h) * d;
        outs[h] = out + (g0 * group + h) * d;
      }
      thread_local std::vector<float> deq;  // one block of this item's heads (quantized pools)
      if (quantized) deq.resize(static_cast<size_t>(bs * (g1 - g0) * d));
      auto each_block = [&](bool values, auto&& fn) {
        for (int64_t j0 = 0; j0 < n_keys; j0 += bs) {
          const int64_t nb = std::min(bs, n_keys - j0);
          std::fill(limit.begin(), limit.end(), nb);
          if (!quantized) {
            for (int64_t g = g0; g < g1; ++g)
              fn(j0, (g - g0) * group, cpu::attn_kv{kv.k, kv.v, block_table + j0 / bs, bs, row, g * d, d});
            continue;
          }
          const int64_t block = block_table[j0 / bs];
          dequantize_block((values ? kv.v_codes : kv.k_codes) + block * bs * row,
                           (values ? kv.v_scales : kv.k_scales) + block * bs * kv.n_kv_heads, nb, kv.n_kv_heads, g0, g1, d,
                           kv.type, fp8_row, deq.data());
          for (int64_t g = g0; g < g1; ++g)
            fn(j0, (g - g0) * group,
               cpu::attn_kv{deq.data(), deq.data(), zero_table, bs, (g1 - g0) * d, (g - g0) * d, d});
        }
      };
      each_block(false, [&](int64_t j0, int64_t h, const cpu::attn_kv& a) {
        be.scores(qs.data() + h, limit.data(), static_cast<int>(group), a, scale, s.data() + h * lds + j0, lds);
      });
      for (int64_t h = 0; h < nh; ++h) be.softmax(s.data() + h * lds, n_keys);
      each_block(true, [&](int64_t j0, int64_t h, const cpu::attn_kv& a) {
        be.weighted_sum(s.data() + h * lds + j0, lds, limit.data(), static_cast<int>(group), a, outs.data() + h,
                        j0 > 0);
      });
    }
    return;
  }
#pragma omp parallel if (items > 1)
  {
    thread_local std::vector<float> scratch, keys, values;
    scratch.resize(static_cast<size_t>(tb * group * lds));
    std::vector<const float*> qs(tb * group);
    std::vector<float*> outs(tb * group);
    std::vector<int64_t> limit(tb * group), range_limit(tb * group);
    if (gather) {
      keys.resize(static_cast<size_t>(n_keys_max * d));
      values.resize(keys.size());
      int64_t have = -1;  // the head whose keys and values sit in `keys` / `values`
#pragma omp for schedule(static, blocks)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t g = item / blocks, blk = blocks - 1 - item % blocks;
        const cpu::attn_kv pooled{kv.k, kv.v, block_table, kv.block_size, static_cast<int64_t>(kv.n_kv_heads) * d, g * d, d};
        if (have != g) {
          cpu::kv_cursor cur(pooled, 0);
          for (int64_t p = 0;;) {
            if (quantized) {
              const int64_t slot = int64_t{block_table[cur.block]} * kv.block_size + cur.slot, nh = kv.n_kv_heads;
              dequantize_block(kv.k_codes + slot * pooled.row, kv.k_scales + slot * nh, 1, nh, g, g + 1, d, kv.type,
                               fp8_row, keys.data() + p * d);
              dequantize_block(kv.v_codes + slot * pooled.row, kv.v_scales + slot * nh, 1, nh, g, g + 1, d, kv.type,
                               fp8_row, values.data() + p * d);
            } else {
              std::memcpy(keys.data() + p * d, kv.k + cur.at, static_cast<size_t>(d) * sizeof(float));
              std::memcpy(values.data() + p * d, kv.v + cur.at, static_cast<size_t>(d) * sizeof(float));
            }
            if (++p == n_keys_max) break;
            cur.next();
          }
          have = g;
        }
        const cpu::attn_kv packed{keys.data(), values.data(), zero_table, n_keys_max, d, 0, d};
        run_item(g, blk, packed, scratch.data(), qs.data(), outs.data(), limit.data(), range_limit.data());
      }
    } else {
      // Later tokens see more keys: hand out the longest items first.
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = items - 1; item >= 0; --item) {
        const int64_t g = item % kv.n_kv_heads, blk = item / kv.n_kv_heads;
        const cpu::attn_kv pooled{kv.k, kv.v, block_table, kv.block_size, static_cast<int64_t>(kv.n_kv_heads) * d, g * d, d};
        run_item(g, blk, pooled, scratch.data(), qs.data(), outs.data(), limit.data(), range_limit.data());
      }
    }
  }
}

namespace cpu {
const attn_backend& attn_backend_generic() {
  static const attn_backend b{"generic", scores_generic, softmax_generic, weighted_sum_generic};
  return b;
}
}  // namespace cpu

}  // namespace troupe::kernels
