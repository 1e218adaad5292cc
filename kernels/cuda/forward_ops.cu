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

__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                            const float* inv_freq, float scale) {
  const int64_t half = head_dim / 2;
  const int64_t total = n_tokens * n_heads * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / (n_heads * half);
    const int64_t rem = idx % (n_heads * half);
    const int64_t h = rem / half, i = rem % half;
    const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
    const float c = static_cast<float>(cos(angle) * scale), s = static_cast<float>(sin(angle) * scale);
    float* v = x + (t * n_heads + h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

__global__ void kv_write_kernel(float* k_pool, float* v_pool, const float* k, const float* v, const int32_t* slots,
                                int64_t n, int64_t row) {
  const int64_t total = n * row;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / row, j = idx % row;
    const int64_t dst = static_cast<int64_t>(slots[t]) * row + j;
    k_pool[dst] = k[idx];
    v_pool[dst] = v[idx];
  }
}

// grid (n_rows, n_heads), kThreads threads. Shared: q [d], acc [d], p [kThreads], red [32].
// Keys in tiles of kThreads: thread j scores key t0 + j; the tile's max and sum update the running
// (m, l) of an online softmax; threads then own output dimensions and add p · V of the tile.
__global__ void paged_attention_kernel(const float* q, int64_t n_heads, int64_t n_kv_heads, int64_t d,
                                       const float* k_pool, const float* v_pool, int32_t bs, const int32_t* tables,
                                       const int32_t* table_offsets, const int32_t* positions, float scale,
                                       float* out) {
  extern __shared__ float sh[];
  float* qs = sh;
  float* acc = qs + d;
  float* p = acc + d;
  float* red = p + kThreads;
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t row_floats = n_kv_heads * d;
  const float* qrow = q + (r * n_heads + h) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    qs[i] = qrow[i];
    acc[i] = 0.0f;
  }
  __syncthreads();
  const int32_t pos = positions[r];
  const int32_t* table = tables + table_offsets[r];
  float m = -INFINITY, l = 0.0f;
  for (int32_t t0 = 0; t0 <= pos; t0 += kThreads) {
    const int32_t j = t0 + static_cast<int32_t>(threadIdx.x);
    float s = -INFINITY;
    if (j <= pos) {
      const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      const float* krow = k_pool + slot * row_floats + kvh * d;
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i) dot += qs[i] * krow[i];
      s = dot * scale;
    }
    const float new_m = fmaxf(m, block_max(s, red));  // key t0 <= pos is always valid: finite
    const float corr = expf(m - new_m);                // 0 on the first tile (m = -inf)
    const float pj = j <= pos ? expf(s - new_m) : 0.0f;
    p[threadIdx.x] = pj;
    l = l * corr + block_sum(pj, red);  // its barriers also publish p
    const int32_t nt = min(kThreads, pos - t0 + 1);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      float a = acc[i] * corr;
      for (int32_t jj = 0; jj < nt; ++jj) {
        const int32_t key = t0 + jj;
        const int64_t slot = static_cast<int64_t>(table[key / bs]) * bs + key % bs;
        a += p[jj] * v_pool[slot * row_floats + kvh * d + i];
      }
      acc[i] = a;
    }
    m = new_m;
    __syncthreads();  // p is rewritten by the next tile
  }
  float* o = out + (r * n_heads + h) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = acc[i] / l;
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
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

void check_launch(const char* kernel) {
  static const bool sync = [] {
    const char* e = std::getenv("TROUPE_CUDA_SYNC_CHECK");
    return e != nullptr && std::strcmp(e, "0") != 0 && *e != '\0';
  }();
  check(cudaGetLastError(), std::string("launch of ") + kernel);
  if (sync) check(cudaDeviceSynchronize(), std::string("after ") + kernel);
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
  rmsnorm_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(x, weight, dim, eps, out);
  check_launch("rmsnorm_f32");
}

void rope_f32(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
              const float* inv_freq, float scale, stream_t stream) {
  const int64_t total = n_tokens * n_heads * (head_dim / 2);
  if (total <= 0) return;
  rope_kernel<<<grid_for(total, 256), 256, 0, stream>>>(x, n_tokens, n_heads, head_dim, positions, inv_freq, scale);
  check_launch("rope_f32");
}

void kv_write_f32(float* k_pool, float* v_pool, const float* k, const float* v, const int32_t* slots, int64_t n,
                  int64_t kv_row_floats, stream_t stream) {
  if (n <= 0) return;
  kv_write_kernel<<<grid_for(n * kv_row_floats, 256), 256, 0, stream>>>(k_pool, v_pool, k, v, slots, n,
                                                                         kv_row_floats);
  check_launch("kv_write_f32");
}

void paged_attention_f32(const float* q, int64_t n_rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                         const float* k_pool, const float* v_pool, int32_t block_size, const int32_t* tables,
                         const int32_t* table_offsets, const int32_t* positions, float scale, float* out,
                         stream_t stream) {
  if (n_rows <= 0) return;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || n_heads > 65535 || n_rows >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "paged_attention_f32: bad head counts or too many rows");
  const size_t shared = static_cast<size_t>(2 * head_dim + kThreads + 32) * sizeof(float);
  if (shared > 48 * 1024) throw_error(errc::unsupported, "paged_attention_f32: head_dim too large for v0");
  dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_heads));
  paged_attention_kernel<<<grid, kThreads, shared, stream>>>(q, n_heads, n_kv_heads, head_dim, k_pool, v_pool,
                                                             block_size, tables, table_offsets, positions, scale,
                                                             out);
  check_launch("paged_attention_f32");
}

void silu_mul_f32(const float* gate, const float* up, int64_t count, float* out, stream_t stream) {
  if (count <= 0) return;
  silu_mul_kernel<<<grid_for(count, 256), 256, 0, stream>>>(gate, up, count, out);
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
