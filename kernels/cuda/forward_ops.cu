// Kernels of the CUDA forward step v0 (kernels/cuda/forward_ops.hpp): plain, float32, one block per
// row or per (query, head); correctness first, no tiling beyond attention's key tiles.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/forward_ops.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int kThreads = 128;  // every block-reducing kernel: a multiple of 32

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw_error(e == cudaErrorMemoryAllocation ? errc::resource_exhausted : errc::internal,
              what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Threads of a one-block-a-row norm: about two elements each, so the row's loads are all in
// flight at once (a decode step's norms are bound by their latency), 32 to 1024.
unsigned norm_threads(int64_t dim) {
  const int64_t t = ((dim + 1) / 2 + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

unsigned grid_for(int64_t total, int threads) {
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > 65535 * 16) blocks = 65535 * 16;  // grid-stride loops cover the rest
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Block-wide reductions; every thread returns the same value (all read `red` in the same order).
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // earlier readers of red are done
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += red[w];
  return total;
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmaxf(m, red[w]);
  return m;
}

__global__ void widen_kernel(const void* src, int type, int64_t count, float* dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (type == 2) {
      dst[i] = __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(src)[i]) << 16);
    } else if (type == 1) {
      dst[i] = __half2float(static_cast<const __half*>(src)[i]);
    } else {
      dst[i] = static_cast<const float*>(src)[i];
    }
  }
}

__global__ void embedding_kernel(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  const int64_t total = n * dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / dim, c = i % dim;
    out[i] = table[static_cast<int64_t>(ids[r]) * dim + c];
  }
}

__global__ void rmsnorm_kernel(const float* x, const float* w, int64_t dim, float eps, float* out) {
  __shared__ float red[32];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, red);  // every thread's reads of xr happen before this barrier
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = (xr[i] * inv) * w[i];
}

// x += y, then out = rmsnorm(x) * weight, per row (one block a row): the residual add and the
// next norm in one pass, with rmsnorm_kernel's arithmetic and order.
__global__ void add_rmsnorm_kernel(float* x, const float* y, const float* w, int64_t dim, float eps, float* out) {
  __shared__ float red[32];
  float* xr = x + blockIdx.x * dim;
  const float* yr = y + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = xr[i] + yr[i];
    xr[i] = v;
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = (xr[i] * inv) * w[i];
}

// grid (n, hq + 2 hk), kThreads threads, shared [d] floats. Block (t, h): for a query head
// (h < hq) or key head (h < hq + hk), the head's row is RMS-normalised with q_norm / k_norm (as
// rmsnorm_kernel) and rotated (as kernels/cpu: angle and cos/sin in double, times the attention
// factor, rounded to float), then written to q_out or to the key pool at the token's slot; a value
// head is copied to the value pool.
__global__ void qkv_finish_kernel(const float* qs, int64_t q_stride, const float* ks, int64_t k_stride,
                                  const float* vs, int64_t v_stride, int64_t hq, int64_t hk, int64_t d,
                                  const float* q_norm, const float* k_norm, float eps, const int32_t* positions,
                                  const float* inv_freq, float rope_scale, const int32_t* slots, float* k_pool,
                                  float* v_pool, float* q_out) {
  extern __shared__ float row[];
  __shared__ float red[32];
  const int64_t t = blockIdx.x, h = blockIdx.y, kv_row = hk * d;
  const int64_t slot = slots[t];
  if (h >= hq + hk) {
    const int64_t vh = h - hq - hk;
    const float* src = vs + t * v_stride + vh * d;
    float* dst = v_pool + slot * kv_row + vh * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dst[i] = src[i];
    return;  // the whole block: h is the block's
  }
  const bool is_q = h < hq;
  const int64_t hh = is_q ? h : h - hq;
  const float* src = is_q ? qs + t * q_stride + hh * d : ks + t * k_stride + hh * d;
  const float* w = is_q ? q_norm : k_norm;
  float* dst = is_q ? q_out + (t * hq + hh) * d : k_pool + slot * kv_row + hh * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += src[i] * src[i];
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) row[i] = (src[i] * inv) * w[i];
  __syncthreads();
  const int64_t half = d / 2;
  const double pos = static_cast<double>(positions[t]);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const double angle = pos * static_cast<double>(inv_freq[i]);
    const float c = static_cast<float>(cos(angle) * rope_scale), sn = static_cast<float>(sin(angle) * rope_scale);
    const float a = row[i], b = row[i + half];
    dst[i] = a * c - b * sn;
    dst[i + half] = b * c + a * sn;
  }
}

// grid (n_rows, n_heads), 128 or 512 threads (below); head_dim a multiple of 4 up to
// kMaxHeadChunks * 128 (Qwen3: 128). Keys in tiles of one a thread: thread j looks up key t0 + j's
// slot. The work is split for a decode step, whose time is the latency of its loads: a warp per
// key, each lane a float4 of the key's row (a row in one coalesced load), 8 keys' loads in flight
// per warp, for the scores and then for p . V; the tile's max and sum update the running (m, l) of
// an online softmax, and the warps' partial p . V sums meet in shared memory. Shared: acc [d],
// p [tile], slot [tile], red [32], part [warps * d].
constexpr int kMaxHeadChunks = 4;
// Threads a block: a decode step has few (token, head) blocks (16 for Qwen3-0.6B at batch 1, on
// 132 SMs), each a chain of dependent loads, so it gets 16 warps, which shortens each warp's share
// of the keys (4 warps: 20.6 us a layer on an H200, 512 threads: 9.5); a prefill step has blocks
// enough to fill the device, where 4 warps a block run faster (measured: 512 threads took a
// 512-token FP8 prefill from 13.7 to 21.3 ms). The tile of keys is one per thread.
constexpr int kAttnThreadsFew = 512, kAttnThreadsMany = 128;
constexpr int64_t kAttnManyBlocks = 256;

__global__ void paged_attention_kernel(const float* q, int64_t n_heads, int64_t n_kv_heads, int64_t d,
                                       const float* k_pool, const float* v_pool, int32_t bs, const int32_t* tables,
                                       const int32_t* table_offsets, const int32_t* positions, float scale,
                                       float* out) {
  extern __shared__ float sh[];
  float* acc = sh;
  const int32_t tile = static_cast<int32_t>(blockDim.x);
  float* p = acc + d;
  int64_t* slots = reinterpret_cast<int64_t*>(p + tile);  // d % 4 == 0, tile % 32 == 0: 8-byte aligned
  float* red = reinterpret_cast<float*>(slots + tile);
  float* part = red + 32;  // 16-byte aligned: the offsets before it are multiples of 4 floats
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t row_floats = n_kv_heads * d;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int warps = static_cast<int>(blockDim.x >> 5);
  const int64_t d4 = d / 4;  // float4s in a row; lane owns float4s lane, lane + 32, ...
  float4 qv[kMaxHeadChunks];
  const float4* q4 = reinterpret_cast<const float4*>(q + (r * n_heads + h) * d);
#pragma unroll
  for (int c = 0; c < kMaxHeadChunks; ++c) qv[c] = lane + 32 * c < d4 ? q4[lane + 32 * c] : make_float4(0, 0, 0, 0);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) acc[i] = 0.0f;
  const int32_t pos = positions[r];
  const int32_t* table = tables + table_offsets[r];
  float m = -INFINITY, l = 0.0f;
  for (int32_t t0 = 0; t0 <= pos; t0 += tile) {
    const int32_t nt = min(tile, pos - t0 + 1);
    const int32_t j = t0 + static_cast<int32_t>(threadIdx.x);
    if (j <= pos) slots[threadIdx.x] = (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * row_floats + kvh * d;
    __syncthreads();
#pragma unroll 8
    for (int32_t jj = warp; jj < nt; jj += warps) {
      const float4* k4 = reinterpret_cast<const float4*>(k_pool + slots[jj]);
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < kMaxHeadChunks; ++c) {
        if (lane + 32 * c < d4) {
          const float4 kv = k4[lane + 32 * c];
          dot += qv[c].x * kv.x + qv[c].y * kv.y + qv[c].z * kv.z + qv[c].w * kv.w;
        }
      }
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (lane == 0) p[jj] = dot * scale;
    }
    __syncthreads();
    const float s = j <= pos ? p[threadIdx.x] : -INFINITY;
    const float new_m = fmaxf(m, block_max(s, red));  // key t0 <= pos is always valid: finite
    const float corr = expf(m - new_m);                // 0 on the first tile (m = -inf)
    const float pj = j <= pos ? expf(s - new_m) : 0.0f;
    p[threadIdx.x] = pj;
    l = l * corr + block_sum(pj, red);  // its barriers also publish p
    float4 pv[kMaxHeadChunks];
#pragma unroll
    for (int c = 0; c < kMaxHeadChunks; ++c) pv[c] = make_float4(0, 0, 0, 0);
#pragma unroll 8
    for (int32_t jj = warp; jj < nt; jj += warps) {
      const float4* v4 = reinterpret_cast<const float4*>(v_pool + slots[jj]);
      const float pk = p[jj];
#pragma unroll
      for (int c = 0; c < kMaxHeadChunks; ++c) {
        if (lane + 32 * c < d4) {
          const float4 vv = v4[lane + 32 * c];
          pv[c].x += pk * vv.x;
          pv[c].y += pk * vv.y;
          pv[c].z += pk * vv.z;
          pv[c].w += pk * vv.w;
        }
      }
    }
    float4* mine = reinterpret_cast<float4*>(part + warp * d);
#pragma unroll
    for (int c = 0; c < kMaxHeadChunks; ++c)
      if (lane + 32 * c < d4) mine[lane + 32 * c] = pv[c];
    __syncthreads();
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      float a = acc[i] * corr;
      for (int w = 0; w < warps; ++w) a += part[w * d + i];
      acc[i] = a;
    }
    m = new_m;
    __syncthreads();  // p, slots and part are rewritten by the next tile
  }
  float* o = out + (r * n_heads + h) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = acc[i] / l;
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, int64_t width, int64_t in_stride,
                                float* out) {
  const int64_t count = n * width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t src = (i / width) * in_stride + i % width;
    const float g = gate[src];
    out[i] = g / (1.0f + expf(-g)) * up[src];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int64_t n, int64_t dim, float* dst) {
  const int64_t total = n * dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / dim, c = i % dim;
    dst[i] = src[static_cast<int64_t>(rows[r]) * dim + c];
  }
}

void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw_error(errc::internal, std::string(what) + ": " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

}  // namespace

bool sync_check_enabled() {
  static const bool sync = [] {
    const char* e = std::getenv("TROUPE_CUDA_SYNC_CHECK");
    return e != nullptr && std::strcmp(e, "0") != 0 && *e != '\0';
  }();
  return sync;
}

void check_launch(const char* kernel) {
  check(cudaGetLastError(), std::string("launch of ") + kernel);
  if (sync_check_enabled()) check(cudaDeviceSynchronize(), std::string("after ") + kernel);
}

void widen_to_f32(const void* src, int src_type, int64_t count, float* dst, stream_t stream) {
  if (count <= 0) return;
  widen_kernel<<<grid_for(count, 256), 256, 0, stream>>>(src, src_type, count, dst);
  check_launch("widen_to_f32");
}

void embedding_f32(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out, stream_t stream) {
  if (n <= 0) return;
  embedding_kernel<<<grid_for(n * dim, 256), 256, 0, stream>>>(table, ids, n, dim, out);
  check_launch("embedding_f32");
}

void rmsnorm_f32(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
                 stream_t stream) {
  if (n <= 0) return;
  if (n >= (int64_t{1} << 31)) throw_error(errc::invalid_argument, "rmsnorm_f32: too many rows");
  rmsnorm_kernel<<<static_cast<unsigned>(n), norm_threads(dim), 0, stream>>>(x, weight, dim, eps, out);
  check_launch("rmsnorm_f32");
}

void add_rmsnorm_f32(float* x, const float* y, const float* weight, int64_t n, int64_t dim, float eps, float* out,
                     stream_t stream) {
  if (n <= 0) return;
  if (n >= (int64_t{1} << 31)) throw_error(errc::invalid_argument, "add_rmsnorm_f32: too many rows");
  add_rmsnorm_kernel<<<static_cast<unsigned>(n), norm_threads(dim), 0, stream>>>(x, y, weight, dim, eps, out);
  check_launch("add_rmsnorm_f32");
}

void qkv_finish_f32(const qkv_rows& in, int64_t n, int64_t hq, int64_t hk, int64_t d, const float* q_norm,
                    const float* k_norm, float eps, const int32_t* positions, const float* inv_freq, float rope_scale,
                    const int32_t* slots, float* k_pool, float* v_pool, float* q_out, stream_t stream) {
  if (n <= 0) return;
  if (n >= (int64_t{1} << 31) || hq + 2 * hk > 65535 || d % 2 != 0)
    throw_error(errc::invalid_argument, "qkv_finish_f32: too many rows or heads, or an odd head_dim");
  const size_t shared = static_cast<size_t>(d) * sizeof(float);
  if (shared > 48 * 1024) throw_error(errc::unsupported, "qkv_finish_f32: head_dim too large");
  dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(hq + 2 * hk));
  qkv_finish_kernel<<<grid, kThreads, shared, stream>>>(in.q, in.q_stride, in.k, in.k_stride, in.v, in.v_stride, hq, hk,
                                                        d, q_norm, k_norm, eps, positions, inv_freq, rope_scale, slots,
                                                        k_pool, v_pool, q_out);
  check_launch("qkv_finish_f32");
}

void paged_attention_f32(const float* q, int64_t n_rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                         const float* k_pool, const float* v_pool, int32_t block_size, const int32_t* tables,
                         const int32_t* table_offsets, const int32_t* positions, float scale, float* out,
                         stream_t stream) {
  if (n_rows <= 0) return;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || n_heads > 65535 || n_rows >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "paged_attention_f32: bad head counts or too many rows");
  dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_heads));
  if (head_dim <= 0 || head_dim % 4 != 0 || head_dim > 128 * kMaxHeadChunks)
    throw_error(errc::unsupported, "paged_attention_f32: head_dim must be a multiple of 4 up to " +
                                       std::to_string(128 * kMaxHeadChunks) + "; got " + std::to_string(head_dim));
  const int threads = n_rows * n_heads >= kAttnManyBlocks ? kAttnThreadsMany : kAttnThreadsFew;
  const size_t shared = static_cast<size_t>(head_dim + threads + 32 + (threads / 32) * head_dim) * sizeof(float) +
                        static_cast<size_t>(threads) * sizeof(int64_t);
  paged_attention_kernel<<<grid, threads, shared, stream>>>(q, n_heads, n_kv_heads, head_dim, k_pool, v_pool,
                                                             block_size, tables, table_offsets, positions, scale, out);
  check_launch("paged_attention_f32");
}

void silu_mul_f32(const float* gate, const float* up, int64_t n, int64_t width, int64_t in_stride, float* out,
                  stream_t stream) {
  if (n <= 0 || width <= 0) return;
  silu_mul_kernel<<<grid_for(n * width, 256), 256, 0, stream>>>(gate, up, n, width, in_stride, out);
  check_launch("silu_mul_f32");
}

void add_inplace_f32(float* x, const float* y, int64_t count, stream_t stream) {
  if (count <= 0) return;
  add_kernel<<<grid_for(count, 256), 256, 0, stream>>>(x, y, count);
  check_launch("add_inplace_f32");
}

void gather_rows_f32(const float* src, const int32_t* rows, int64_t n, int64_t dim, float* dst, stream_t stream) {
  if (n <= 0) return;
  gather_rows_kernel<<<grid_for(n * dim, 256), 256, 0, stream>>>(src, rows, n, dim, dst);
  check_launch("gather_rows_f32");
}

void matmul_f32_cublas(const blas_handle& blas, const float* x, int64_t n, const float* w, int64_t rows,
                       int64_t cols, float* y, stream_t stream) {
  if (n <= 0 || rows <= 0 || cols <= 0 || n >= (int64_t{1} << 31) || rows >= (int64_t{1} << 31) ||
      cols >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "matmul_f32_cublas: n, rows, cols must be in [1, 2^31)");
  auto h = static_cast<cublasHandle_t>(blas.get());
  check_blas(cublasSetStream(h, stream), "cublasSetStream");
  // NOTE: pedantic: no TF32 (10-bit mantissa) tensor-core path; the golden tolerance needs fp32.
  check_blas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  // Column-major view: y^T [rows, n] = (w as [cols, rows])^T · (x as [cols, n]).
  const float alpha = 1.0f, beta = 0.0f;
  check_blas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                         static_cast<int>(cols), &alpha, w, static_cast<int>(cols), x, static_cast<int>(cols), &beta,
                         y, static_cast<int>(rows)),
             "cublasSgemm (f32, pedantic)");
  check_launch("cublasSgemm");
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

}  // namespace troupe::kernels::cuda
