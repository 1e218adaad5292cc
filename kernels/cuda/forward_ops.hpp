// The element-wise and attention kernels of the CUDA forward step v0 (runtime/engine/cuda), and its
// float32 GEMM, callable from plain C++ (no CUDA headers here). Written simply, for correctness
// first: one thread block per row (norms) or per (query, head) (attention), float32 throughout.
// Every pointer is device memory; every call is asynchronous on `stream` (nullptr: legacy default).
// Launch errors throw troupe::error(internal) naming the kernel; with TROUPE_CUDA_SYNC_CHECK=1 in
// the environment each call also synchronizes, so a fault inside a kernel names that kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gemm.hpp"

namespace troupe::kernels::cuda {

// Widen `count` elements of a bf16 (src_type 2) or f16 (src_type 1) or f32 (src_type 0) array to
// float32 (exact). The type codes are troupe::dtype's values (f32 = 0, f16 = 1, bf16 = 2).
void widen_to_f32(const void* src, int src_type, int64_t count, float* dst, stream_t stream);

// out[r] = table[ids[r]]   table: [vocab, dim] float32, ids: [n] int32, out: [n, dim]
void embedding_f32(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out, stream_t stream);

// out = x / sqrt(mean(x²) + eps) * weight, per row.  x, out: [n, dim] (may alias), weight: [dim]
void rmsnorm_f32(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
                 stream_t stream);

// x += y, then out = rmsnorm(x) * weight, per row: a residual add and the next norm in one pass
// (the same arithmetic as add_inplace_f32 then rmsnorm_f32). x, y, out: [n, dim]; out may alias y.
void add_rmsnorm_f32(float* x, const float* y, const float* weight, int64_t n, int64_t dim, float eps, float* out,
                     stream_t stream);

// Where a step's q, k and v projections lie: token t's heads start at q + t * q_stride (and the
// same for k, v), whether one fused QKV product wrote them side by side or three products apart.
struct qkv_rows {
  const float* q;
  int64_t q_stride;
  const float* k;
  int64_t k_stride;
  const float* v;
  int64_t v_stride;
};

// Everything between the QKV product and attention, one launch: Qwen3's per-head RMSNorm of q and
// k (q_norm, k_norm: [head_dim]), rotary embedding (rotate-half; angle = position * inv_freq in
// double, cos/sin in double times `rope_scale`, YaRN's attention factor, rounded to float, as
// kernels/cpu does), q to q_out [n, hq, head_dim], k and v to the paged pool layer
// [num_blocks * block_size, hk, head_dim] at slots[t] = block_table[pos / bs] * bs + pos % bs.
void qkv_finish_f32(const qkv_rows& in, int64_t n, int64_t hq, int64_t hk, int64_t head_dim, const float* q_norm,
                    const float* k_norm, float eps, const int32_t* positions, const float* inv_freq, float rope_scale,
                    const int32_t* slots, float* k_pool, float* v_pool, float* q_out, stream_t stream);

// Causal attention through block tables, one thread block per (query row, head).
//   q:   [n_rows, n_heads, head_dim]; row r sits at position positions[r] and sees keys 0..positions[r]
//        of the sequence whose block table starts at tables + table_offsets[r]
//   out: [n_rows, n_heads, head_dim]
// Query head h reads kv head h / (n_heads / n_kv_heads). Scores in float32, max-subtracted softmax
// kept online per tile of keys (flash style), output divided by the sum at the end. head_dim: a
// multiple of 4 up to 512 (float4 rows), else troupe::error(unsupported).
void paged_attention_f32(const float* q, int64_t n_rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                         const float* k_pool, const float* v_pool, int32_t block_size, const int32_t* tables,
                         const int32_t* table_offsets, const int32_t* positions, float scale, float* out,
                         stream_t stream);

// out[t][i] = silu(gate[t * in_stride + i]) * up[t * in_stride + i] for t < n, i < width; out
// [n, width] is contiguous (a fused gate/up product leaves gate and up side by side in one row).
void silu_mul_f32(const float* gate, const float* up, int64_t n, int64_t width, int64_t in_stride, float* out,
                  stream_t stream);

// x[i] += y[i]
void add_inplace_f32(float* x, const float* y, int64_t count, stream_t stream);

// dst[r] = src[rows[r]]   src: [*, dim], rows: [n], dst: [n, dim]
void gather_rows_f32(const float* src, const int32_t* rows, int64_t n, int64_t dim, float* dst, stream_t stream);

// y = x · wᵀ in float32 through cublasSgemm with CUBLAS_PEDANTIC_MATH (no TF32, no reduced
// precision): x [n, cols], w [rows, cols], y [n, rows], row-major. Sets the handle's stream.
void matmul_f32_cublas(const blas_handle& blas, const float* x, int64_t n, const float* w, int64_t rows,
                       int64_t cols, float* y, stream_t stream);

// Synchronous host <-> device copies of raw bytes (throw troupe::error naming the copy).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

// After a launch: throws internal naming `kernel` on a launch error; synchronizes first when
// TROUPE_CUDA_SYNC_CHECK=1 (read once).
void check_launch(const char* kernel);
// Whether TROUPE_CUDA_SYNC_CHECK=1 is set (then nothing may be captured into a graph: it synchronizes).
bool sync_check_enabled();

}  // namespace troupe::kernels::cuda
