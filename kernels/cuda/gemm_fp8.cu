// The FP8 block-scaled GEMM of kernels/cuda/gemm.hpp: per-token activation quantization, then
// mma.sync m16n8k32 e4m3 x e4m3 -> f32 with the block scales applied per 128-deep column block.
//
// Roles (swap-AB): the MMA's A operand (m16, "row") is 16 weight rows, its B operand (n8, "col")
// is 8 tokens, so a decode step with n = 1 wastes 7/8 of an MMA rather than 15/16, and both
// operands are read straight from their row-major [*, cols] storage.
//
// Fragment layout (PTX ISA, mma.m16n8k32 with .e4m3; g = lane / 4, t = lane % 4):
//   A: 4 x b32 = 16 bytes: reg0 row g, reg1 row g+8, reg2 row g, reg3 row g+8; the 4 bytes of a
//      register are 4 consecutive MMA-k: reg0/reg1 hold mma-k 4t..4t+3, reg2/reg3 16+4t..16+4t+3.
//   B: 2 x b32: column (token) g; reg0 mma-k 4t..4t+3, reg1 16+4t..16+4t+3.
//   C: 4 x f32: c0 (row g, col 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
// The sum runs over mma-k, so any bijection from (lane's t, register half, byte) to real columns
// gives the same result as long as A and B use the same one. We use: for the j-th MMA (j = 0..3)
// of a 128-column block, register half h, byte b: column = 32t + 8j + 4h + b. Each thread then
// reads 32 contiguous bytes per row (two 16-byte loads) and needs no shuffles or shared memory.
//
// Work split: a block has 4 x WROWS warps; warp (wr, wk) owns MT m16 tiles of weight rows and NT n8
// tiles of tokens and the column blocks kb = wk, wk + 4, ...; the four k-partial accumulators are
// summed through shared memory as (acc0 + acc1) + (acc2 + acc3): that order is the same for every
// tile shape, so results are batch invariant.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cuda/gemm.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int kBlock = 128;   // the checkpoint's block (group) size: weight_block_size [128, 128]
constexpr int kSplitK = 4;    // warps along k; fixes the order of the final sum (see gemm.hpp)
constexpr float kE4m3Max = 448.0f;

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const errc code = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? errc::unsupported : errc::internal;
  throw_error(code, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

int64_t padded_cols(int64_t cols) { return (cols + kBlock - 1) / kBlock * kBlock; }
int64_t col_blocks(int64_t cols) { return (cols + kBlock - 1) / kBlock; }

// ---------------------------------------------------------------------------------------------
// Activation quantization: one warp per (token, 128-column group); lane l holds columns 4l..4l+3.

__device__ __forceinline__ float4 load4(const float* x, int64_t i) { return *reinterpret_cast<const float4*>(x + i); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* x, int64_t i) {
  const uint2 u = *reinterpret_cast<const uint2*>(x + i);  // 4 bf16 = 8 bytes
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                     __uint_as_float(u.y & 0xffff0000u));
}

// Lets a GEMM launched with programmatic dependent launch start now (its weight loads overlap this
// kernel); it still waits for this grid's completion (griddepcontrol.wait) before reading codes.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Waits until the grids this one depends on (the quantization) have completed and their writes are
// visible; a no-op when the kernel was launched without programmatic dependent launch.
__device__ __forceinline__ void wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// scales_t (nullable): the scales again, token-major [kb_count, n_t] for cuBLASLt's VEC128_32F
// layout, for the first n_t tokens.
template <class T>
__global__ void quantize_kernel(const T* __restrict__ x, int n, int cols, int kb_count, int kpad,
                                uint8_t* __restrict__ codes, float* __restrict__ scales, float* __restrict__ scales_t,
                                int n_t) {
  allow_dependent_launch();
  const int lane = threadIdx.x & 31;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (group >= static_cast<int64_t>(n) * kb_count) return;
  const int64_t token = group / kb_count;
  const int kb = static_cast<int>(group % kb_count);
  const int col = kb * kBlock + 4 * lane;
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (col < cols) v = load4(x, token * cols + col);  // cols % 16 == 0: a lane's 4 columns are all in or out
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = amax / kE4m3Max;  // IEEE division (no fast math): the host reproduces it exactly
  uint32_t packed = 0;
  if (amax > 0.0f) {
    const float q[4] = {v.x / s, v.y / s, v.z / s, v.w / s};
    for (int i = 0; i < 4; ++i)
      packed |= static_cast<uint32_t>(__nv_cvt_float_to_fp8(q[i], __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  }
  *reinterpret_cast<uint32_t*>(codes + token * kpad + kb * kBlock + 4 * lane) = packed;
  if (lane == 0) {
    scales[token * kb_count + kb] = s;
    if (scales_t != nullptr && token < n_t) scales_t[static_cast<int64_t>(kb) * n_t + token] = s;
  }
}

// ---------------------------------------------------------------------------------------------
// The GEMM.

__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  (void)d, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
  __trap();  // the host wrapper refuses devices older than sm_89 before launching
#endif
}

// Word w (0..7) of a thread's 32-byte chunk held as two uint4.
__device__ __forceinline__ uint32_t word(const uint4 (&c)[2], int w) {
  const uint4& h = c[w >> 2];
  switch (w & 3) {
    case 0: return h.x;
    case 1: return h.y;
    case 2: return h.z;
    default: return h.w;
  }
}

__device__ __forceinline__ uint4 ldg16(const uint8_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// Per-thread operand chunks of one 128-column block.
template <int MT, int NT>
struct chunks {
  uint4 a[MT][2][2];  // [m tile][row g / g+8][16-byte half]
  uint4 b[NT][2];     // [n tile][16-byte half]
};

template <int MT, int NT>
__device__ __forceinline__ void load_block(chunks<MT, NT>& c, const uint8_t* __restrict__ w, const uint8_t* __restrict__ a,
                                           int kb, int row0, int tok0, int g, int t, int n, int rows, int cols,
                                           int kpad) {
  const int kvalid = min(kBlock, cols - kb * kBlock);  // a multiple of 16 in [16, 128]
  const int k0 = kb * kBlock + 32 * t;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * m + 8 * h + g;
      const uint8_t* p = w + static_cast<int64_t>(row) * cols + k0;
#pragma unroll
      for (int q = 0; q < 2; ++q) c.a[m][h][q] = ldg16(p + 16 * q, row < rows && 32 * t + 16 * q + 16 <= kvalid);
    }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int tok = tok0 + 8 * j + g;
    const uint8_t* p = a + static_cast<int64_t>(tok) * kpad + k0;  // padded with zero codes to kpad
#pragma unroll
    for (int q = 0; q < 2; ++q) c.b[j][q] = ldg16(p + 16 * q, tok < n);
  }
}

template <int MT, int NT, int WROWS>
__global__ void __launch_bounds__(32 * kSplitK * WROWS)
    gemm_fp8_kernel(const uint8_t* __restrict__ w, const float* __restrict__ w_scales, const uint8_t* __restrict__ a,
                    const float* __restrict__ a_scales, float* __restrict__ y, int n, int rows, int cols) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wk = warp % kSplitK, wr = warp / kSplitK;
  const int g = lane >> 2, t = lane & 3;
  const int kb_count = (cols + kBlock - 1) / kBlock;
  const int kpad = kb_count * kBlock;
  const int row0 = blockIdx.x * (WROWS * MT * 16) + wr * MT * 16;
  const int tok0 = blockIdx.y * (NT * 8);

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.0f;

  chunks<MT, NT> cur;
  if (wk < kb_count) load_block(cur, w, a, wk, row0, tok0, g, t, n, rows, cols, kpad);
  for (int kb = wk; kb < kb_count; kb += kSplitK) {
    // Prefetch the next block of this warp while the tensor cores work on this one.
    chunks<MT, NT> nxt;
    if (kb + kSplitK < kb_count) load_block(nxt, w, a, kb + kSplitK, row0, tok0, g, t, n, rows, cols, kpad);

    float p[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) p[m][j][i] = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s)  // MMA s covers columns 32t + 8s + [0, 8) of the block
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          mma_e4m3(p[m][j], word(cur.a[m][0], 2 * s), word(cur.a[m][1], 2 * s), word(cur.a[m][0], 2 * s + 1),
                   word(cur.a[m][1], 2 * s + 1), word(cur.b[j], 2 * s), word(cur.b[j], 2 * s + 1));

    // Scales: one weight scale per m tile (16 | 128), one activation scale per token.
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int row = row0 + 16 * m;
      const float sw = row < rows ? __ldg(w_scales + (row / kBlock) * kb_count + kb) : 0.0f;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int tok = tok0 + 8 * j + 2 * t;
        const float sa0 = tok < n ? __ldg(a_scales + static_cast<int64_t>(tok) * kb_count + kb) : 0.0f;
        const float sa1 = tok + 1 < n ? __ldg(a_scales + static_cast<int64_t>(tok + 1) * kb_count + kb) : 0.0f;
        const float s0 = sa0 * sw, s1 = sa1 * sw;
        acc[m][j][0] = fmaf(p[m][j][0], s0, acc[m][j][0]);
        acc[m][j][1] = fmaf(p[m][j][1], s1, acc[m][j][1]);
        acc[m][j][2] = fmaf(p[m][j][2], s0, acc[m][j][2]);
        acc[m][j][3] = fmaf(p[m][j][3], s1, acc[m][j][3]);
      }
    }
    cur = nxt;
  }

  // (acc0 + acc1) + (acc2 + acc3) across the four k warps of each row group.
  __shared__ float red[WROWS][kSplitK - 1][MT * NT * 4][32];
  if (wk > 0) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[wr][wk - 1][(m * NT + j) * 4 + i][lane] = acc[m][j][i];
  }
  __syncthreads();
  if (wk != 0) return;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = (m * NT + j) * 4 + i;
        const float v = (acc[m][j][i] + red[wr][0][e][lane]) + (red[wr][1][e][lane] + red[wr][2][e][lane]);
        const int row = row0 + 16 * m + g + (i >= 2 ? 8 : 0);
        const int tok = tok0 + 8 * j + 2 * t + (i & 1);
        if (row < rows && tok < n) y[static_cast<int64_t>(tok) * rows + row] = v;
      }
}

template <int MT, int NT, int WROWS>
void launch_gemm(const uint8_t* w, const float* ws, const uint8_t* a, const float* as, float* y, int n, int rows,
                 int cols, cudaStream_t stream) {
  const dim3 grid((rows + WROWS * MT * 16 - 1) / (WROWS * MT * 16), (n + NT * 8 - 1) / (NT * 8));
  gemm_fp8_kernel<MT, NT, WROWS><<<grid, 32 * kSplitK * WROWS, 0, stream>>>(w, ws, a, as, y, n, rows, cols);
}


// ---------------------------------------------------------------------------------------------
// The decode kernel (small n): the arithmetic of gemm_fp8_kernel<1, NT, 1> exactly (same fragment
// mapping, MMAs, scale products, k-warps and final sum: the same bits), restructured to keep more
// weight bytes in flight, which is what limits a weight-streaming GEMM: each warp loads groups of
// U of its 128-column blocks (codes and both scales) one group ahead (double-buffered registers),
// so up to 2U blocks = 2U x 2 KiB of weights per warp are in flight, where the first kernel had 2
// plus a dependent scale load per block. The first group's weight loads are issued before
// griddepcontrol.wait, i.e. while the quantization kernel may still run.

template <int NT>
struct decode_block {
  uint4 a[2][2];   // [row g / g+8][16-byte half]
  uint4 b[NT][2];  // [n tile][16-byte half]
  float sw;        // weight scale of the block
  float sa[NT][2]; // activation scales of tokens 8j + 2t, 8j + 2t + 1
};

template <int NT, int U>
__device__ __forceinline__ void decode_load_w(decode_block<NT> (&c)[U], const uint8_t* __restrict__ w,
                                              const float* __restrict__ w_scales, int i0, int nblk, int wk, int row0,
                                              int g, int t, int rows, int cols, int kb_count) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int kb = wk + kSplitK * (i0 + u);
    const bool blk = i0 + u < nblk;
    const int kvalid = min(kBlock, cols - kb * kBlock);
    const int k0 = kb * kBlock + 32 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h + g;
      const uint8_t* p = w + static_cast<int64_t>(row) * cols + k0;
#pragma unroll
      for (int q = 0; q < 2; ++q) c[u].a[h][q] = ldg16(p + 16 * q, blk && row < rows && 32 * t + 16 * q + 16 <= kvalid);
    }
    c[u].sw = blk && row0 < rows ? __ldg(w_scales + (row0 / kBlock) * kb_count + kb) : 0.0f;
  }
}

template <int NT, int U>
__device__ __forceinline__ void decode_load_x(decode_block<NT> (&c)[U], const uint8_t* __restrict__ a,
                                              const float* __restrict__ a_scales, int i0, int nblk, int wk, int tok0,
                                              int g, int t, int n, int kb_count, int kpad) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int kb = wk + kSplitK * (i0 + u);
    const bool blk = i0 + u < nblk;
    const int k0 = kb * kBlock + 32 * t;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int tok = tok0 + 8 * j + g;
      const uint8_t* p = a + static_cast<int64_t>(tok) * kpad + k0;
#pragma unroll
      for (int q = 0; q < 2; ++q) c[u].b[j][q] = ldg16(p + 16 * q, blk && tok < n);
      const int ts = tok0 + 8 * j + 2 * t;
      c[u].sa[j][0] = blk && ts < n ? __ldg(a_scales + static_cast<int64_t>(ts) * kb_count + kb) : 0.0f;
      c[u].sa[j][1] = blk && ts + 1 < n ? __ldg(a_scales + static_cast<int64_t>(ts + 1) * kb_count + kb) : 0.0f;
    }
  }
}

template <int NT, int U>
__global__ void __launch_bounds__(32 * kSplitK)
    gemm_fp8_decode_kernel(const uint8_t* __restrict__ w, const float* __restrict__ w_scales,
                           const uint8_t* __restrict__ a, const float* __restrict__ a_scales, float* __restrict__ y,
                           int n, int rows, int cols) {
  const int lane = threadIdx.x & 31, wk = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int kb_count = (cols + kBlock - 1) / kBlock;
  const int kpad = kb_count * kBlock;
  const int row0 = blockIdx.x * 16;
  const int tok0 = blockIdx.y * (NT * 8);
  const int nblk = wk < kb_count ? (kb_count - wk + kSplitK - 1) / kSplitK : 0;  // blocks kb = wk + 4i

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;

  decode_block<NT> cur[U];
  decode_load_w<NT, U>(cur, w, w_scales, 0, nblk, wk, row0, g, t, rows, cols, kb_count);
  wait_for_producer();  // the activation codes and scales are the quantization kernel's output
  decode_load_x<NT, U>(cur, a, a_scales, 0, nblk, wk, tok0, g, t, n, kb_count, kpad);
  for (int i0 = 0; i0 < nblk; i0 += U) {
    decode_block<NT> nxt[U];
    if (i0 + U < nblk) {
      decode_load_w<NT, U>(nxt, w, w_scales, i0 + U, nblk, wk, row0, g, t, rows, cols, kb_count);
      decode_load_x<NT, U>(nxt, a, a_scales, i0 + U, nblk, wk, tok0, g, t, n, kb_count, kpad);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i0 + u >= nblk) break;
      const decode_block<NT>& c = cur[u];
      float p[NT][4];
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) p[j][i] = 0.0f;
#pragma unroll
      for (int s = 0; s < 4; ++s)  // as gemm_fp8_kernel: MMA s covers columns 32t + 8s + [0, 8)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          mma_e4m3(p[j], word(c.a[0], 2 * s), word(c.a[1], 2 * s), word(c.a[0], 2 * s + 1), word(c.a[1], 2 * s + 1),
                   word(c.b[j], 2 * s), word(c.b[j], 2 * s + 1));
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float s0 = c.sa[j][0] * c.sw, s1 = c.sa[j][1] * c.sw;
        acc[j][0] = fmaf(p[j][0], s0, acc[j][0]);
        acc[j][1] = fmaf(p[j][1], s1, acc[j][1]);
        acc[j][2] = fmaf(p[j][2], s0, acc[j][2]);
        acc[j][3] = fmaf(p[j][3], s1, acc[j][3]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i0 + U < nblk) cur[u] = nxt[u];
  }

  // (acc0 + acc1) + (acc2 + acc3) across the four k warps, as gemm_fp8_kernel.
  __shared__ float red[kSplitK - 1][NT * 4][32];
  if (wk > 0) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[wk - 1][j * 4 + i][lane] = acc[j][i];
  }
  __syncthreads();
  if (wk != 0) return;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = j * 4 + i;
      const float v = (acc[j][i] + red[0][e][lane]) + (red[1][e][lane] + red[2][e][lane]);
      const int row = row0 + g + (i >= 2 ? 8 : 0);
      const int tok = tok0 + 8 * j + 2 * t + (i & 1);
      if (row < rows && tok < n) y[static_cast<int64_t>(tok) * rows + row] = v;
    }
}

// Programmatic dependent launch (sm_90+): the kernel may start before the quantization kernel
// ahead of it in the stream has finished; it waits for it with griddepcontrol.wait.
template <int NT, int U>
void launch_decode(const uint8_t* w, const float* ws, const uint8_t* a, const float* as, float* y, int n, int rows,
                   int cols, cudaStream_t stream, bool pdl) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(rows / 16), static_cast<unsigned>((n + NT * 8 - 1) / (NT * 8)));
  cfg.blockDim = dim3(32 * kSplitK);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&cfg, gemm_fp8_decode_kernel<NT, U>, w, ws, a, as, y, n, rows, cols),
             "matmul_fp8_block: decode kernel launch");
}

void launch_decode_any(const uint8_t* w, const float* ws, const uint8_t* a, const float* as, float* y, int n,
                       int rows, int cols, cudaStream_t stream, bool pdl) {
  if (n <= 8)
    launch_decode<1, 4>(w, ws, a, as, y, n, rows, cols, stream, pdl);  // 8 blocks = 16 KiB per warp in flight
  else
    launch_decode<2, 2>(w, ws, a, as, y, n, rows, cols, stream, pdl);  // 16 tokens per tile, any n
}

// Returns the current device's compute capability (major * 10 + minor).
int check_device() {
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "matmul_fp8_block: no usable CUDA device (cudaGetDevice)");
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute");
  if (major * 10 + minor < 89)
    throw_error(errc::unsupported, "matmul_fp8_block needs FP8 tensor cores (sm_89 or newer); device " +
                                       std::to_string(dev) + " is sm_" + std::to_string(major * 10 + minor));
  return major * 10 + minor;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }


// ---------------------------------------------------------------------------------------------
// The cuBLASLt path (prefill). Column-major view of the row-major operands (cuBLASLt's FP8 GEMMs
// want "TN": A transposed, B not):
//   A = weights: row-major [rows, cols] = column-major [cols, rows], lda = cols, op T -> m = rows
//       scales BLK128x128_32F: one float per 128 x 128 block, [ceil(cols/128), ceil(rows/128)]
//       column-major, i.e. index kb + rb * kb_count: the checkpoint's row-major
//       [ceil(rows/128), ceil(cols/128)] as it is (PyTorch passes weight_scale_inv.t() the same way;
//       its leading dimension must be a multiple of 4, hence cols % 512 == 0)
//   B = activation codes: row-major [n, kpad] = column-major [kpad, n], ldb = kpad, op N -> n
//       scales VEC128_32F: one float per token and 128 columns, token-major ("outer-dim-major" in
//       PyTorch's words): index kb * n + token, written by the quantization kernel as scales_t
//   D = y: column-major [rows, n], ldd = rows = row-major [n, rows]; float32, beta = 0
// y = sum over blocks of (A block . B block) * sa * sw in cuBLASLt's own order and precision.

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // NVIDIA's recommendation for Hopper

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
size_t lt_scales_offset(int64_t n, int64_t cols) {
  return align_up(fp8_scales_offset(n, cols) + static_cast<size_t>(n) * col_blocks(cols) * sizeof(float), 256);
}
size_t lt_workspace_offset(int64_t n, int64_t cols) {
  return align_up(lt_scales_offset(n, cols) + static_cast<size_t>(n) * col_blocks(cols) * sizeof(float), 256);
}
size_t lt_workspace_size(int64_t n) { return n >= kFp8CublasLtMinTokens ? kLtWorkspaceBytes : 0; }

bool lt_shape_ok(int64_t n, int64_t rows, int64_t cols) { return n >= 4 && rows % 128 == 0 && cols % 512 == 0; }

void check_lt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw_error(s == CUBLAS_STATUS_NOT_INITIALIZED ? errc::unsupported : errc::internal,
              std::string("matmul_fp8_block (cuBLASLt): ") + what + ": " + cublasLtGetStatusName(s));
}

uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (v & (a - 1)) != 0) a >>= 1;
  return a;
}

struct lt_state {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  // (rows, cols, n, workspace bytes, alignments of A, B, D) -> the heuristic's first algorithm
  // (or none). Keeping it fixed per key also keeps a shape's results reproducible run to run.
  std::map<std::tuple<int64_t, int64_t, int64_t, size_t, uint32_t, uint32_t, uint32_t>,
           std::pair<bool, cublasLtMatmulAlgo_t>>
      algos;
};
lt_state& lt() {
  static lt_state* s = new lt_state;  // never destroyed: no cuBLASLt calls during static destruction
  return *s;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  check_lt(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v), "cublasLtMatmulDescSetAttribute");
}

// Runs y[0, n) = codes[0, n) . w^T through cuBLASLt; false (nothing launched) when its heuristic
// offers no algorithm for this problem.
bool run_cublaslt(const uint8_t* w, const float* w_scales, const uint8_t* codes, const float* scales_t, float* y,
                  int64_t n, int64_t rows, int64_t cols, void* lt_ws, size_t lt_ws_bytes, cudaStream_t stream) {
  lt_state& st = lt();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.handle == nullptr) check_lt(cublasLtCreate(&st.handle), "cublasLtCreate");
  const int64_t kpad = padded_cols(cols);

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct cleanup {
    cublasLtMatmulDesc_t& d;
    cublasLtMatrixLayout_t &a, &b, &c;
    cublasLtMatmulPreference_t& p;
    ~cleanup() {
      if (p) cublasLtMatmulPreferenceDestroy(p);
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (d) cublasLtMatmulDescDestroy(d);
    }
  } guard{desc, la, lb, ld, pref};

  check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
  set_desc(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
  set_desc(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
  set_desc(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scales));
  set_desc(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scales_t));
  check_lt(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, static_cast<uint64_t>(cols), static_cast<uint64_t>(rows),
                                      cols),
           "cublasLtMatrixLayoutCreate (A)");
  check_lt(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, static_cast<uint64_t>(cols), static_cast<uint64_t>(n), kpad),
           "cublasLtMatrixLayoutCreate (B)");
  check_lt(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, static_cast<uint64_t>(rows), static_cast<uint64_t>(n), rows),
           "cublasLtMatrixLayoutCreate (D)");

  const uint32_t al_a = alignment_of(w), al_b = alignment_of(codes), al_d = alignment_of(y);
  const auto key = std::make_tuple(rows, cols, n, lt_ws_bytes, al_a, al_b, al_d);
  auto it = st.algos.find(key);
  if (it == st.algos.end()) {
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws_bytes = lt_ws_bytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                  sizeof ws_bytes),
             "cublasLtMatmulPreferenceSetAttribute");
    for (const auto& [attr, v] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d}})
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof v), "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(st.handle, desc, la, lb, ld, ld, pref, 1, &result, &found);
    // NOT_SUPPORTED / no result: this cuBLASLt or device lacks the block-scaled FP8 kernels.
    const bool ok = hs == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    it = st.algos.emplace(key, std::pair{ok, result.algo}).first;
  }
  if (!it->second.first) return false;
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(st.handle, desc, &alpha, w, la, codes, lb, &beta, y, ld, y, ld, &it->second.second, lt_ws,
                          lt_ws_bytes, stream),
           "cublasLtMatmul");
  return true;
}
void launch_quantize(const void* x, act_type x_type, int64_t n, int64_t cols, void* workspace, float* scales_t,
                     int64_t n_t, cudaStream_t stream) {
  const int kb_count = static_cast<int>(col_blocks(cols));
  auto* codes = static_cast<uint8_t*>(workspace);
  auto* scales = reinterpret_cast<float*>(codes + fp8_scales_offset(n, cols));
  constexpr int kWarps = 8;
  const int64_t groups = n * kb_count;
  const unsigned blocks = static_cast<unsigned>((groups + kWarps - 1) / kWarps);
  const int ni = static_cast<int>(n), ci = static_cast<int>(cols), kpad = static_cast<int>(padded_cols(cols));
  if (x_type == act_type::f32)
    quantize_kernel<<<blocks, 32 * kWarps, 0, stream>>>(static_cast<const float*>(x), ni, ci, kb_count, kpad, codes,
                                                        scales, scales_t, static_cast<int>(n_t));
  else
    quantize_kernel<<<blocks, 32 * kWarps, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), ni, ci, kb_count, kpad,
                                                        codes, scales, scales_t, static_cast<int>(n_t));
  check_cuda(cudaGetLastError(), "quantize_activations_fp8: launch");
}

}  // namespace

const char* fp8_path_name(fp8_path p) noexcept {
  switch (p) {
    case fp8_path::automatic: return "automatic";
    case fp8_path::decode: return "decode";
    case fp8_path::mma: return "mma";
    case fp8_path::cublaslt: return "cublaslt";
  }
  return "?";
}

size_t fp8_scales_offset(int64_t n, int64_t cols) {
  return (static_cast<size_t>(n) * padded_cols(cols) + 15) / 16 * 16;
}

size_t fp8_workspace_bytes(int64_t n, int64_t cols) { return lt_workspace_offset(n, cols) + lt_workspace_size(n); }

void quantize_activations_fp8(const void* x, act_type x_type, int64_t n, int64_t cols, void* workspace,
                              stream_t stream) {
  if (n <= 0 || cols <= 0 || cols % 16 != 0 || n * padded_cols(cols) >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "quantize_activations_fp8: need n >= 1 and cols a positive multiple of 16 "
                                        "with n * cols < 2^31; got n " + std::to_string(n) + ", cols " +
                                            std::to_string(cols));
  if (!aligned16(x) || !aligned16(workspace))
    throw_error(errc::invalid_argument, "quantize_activations_fp8: x and workspace must be 16-byte aligned");
  launch_quantize(x, x_type, n, cols, workspace, nullptr, 0, stream);
}

fp8_path matmul_fp8_block(const void* x, act_type x_type, int64_t n, const uint8_t* w_codes, const float* w_scales,
                          int64_t rows, int64_t cols, float* y, void* workspace, stream_t stream, fp8_path path) {
  if (rows <= 0 || rows % 16 != 0 || cols <= 0 || cols % 16 != 0)
    throw_error(errc::invalid_argument, "matmul_fp8_block: rows and cols must be positive multiples of 16; got rows " +
                                            std::to_string(rows) + ", cols " + std::to_string(cols));
  if (n <= 0 || n * padded_cols(cols) >= (int64_t{1} << 31) || n * rows >= (int64_t{1} << 31) ||
      rows * cols >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "matmul_fp8_block: n must be >= 1 and n * cols, n * rows, rows * cols below "
                                        "2^31; got n " + std::to_string(n) + ", rows " + std::to_string(rows) +
                                            ", cols " + std::to_string(cols));
  if (n > int64_t{65535} * 16)  // grid.y of the largest-n tiles (16 tokens)
    throw_error(errc::invalid_argument, "matmul_fp8_block: n = " + std::to_string(n) + " exceeds 1048560; split the call");
  if (!aligned16(w_codes)) throw_error(errc::invalid_argument, "matmul_fp8_block: w_codes must be 16-byte aligned");
  if (x == nullptr || w_scales == nullptr || y == nullptr || workspace == nullptr)
    throw_error(errc::invalid_argument, "matmul_fp8_block: null pointer");
  if (!aligned16(x) || !aligned16(workspace))
    throw_error(errc::invalid_argument, "matmul_fp8_block: x and workspace must be 16-byte aligned");
  const int sm = check_device();
  if (path == fp8_path::automatic)
    path = n <= 16 ? fp8_path::decode
                   : n >= kFp8CublasLtMinTokens && lt_shape_ok(n, rows, cols) ? fp8_path::cublaslt : fp8_path::mma;
  if (path == fp8_path::cublaslt && !lt_shape_ok(n, rows, cols)) path = fp8_path::mma;

  auto* ws = static_cast<uint8_t*>(workspace);
  const auto* codes = ws;
  const auto* scales = reinterpret_cast<const float*>(ws + fp8_scales_offset(n, cols));
  auto* scales_t = reinterpret_cast<float*>(ws + lt_scales_offset(n, cols));
  const int64_t n_lt = n / 4 * 4;  // cuBLASLt's tokens; the rest go through the decode kernel
  launch_quantize(x, x_type, n, cols, workspace, path == fp8_path::cublaslt ? scales_t : nullptr, n_lt, stream);

  const int ni = static_cast<int>(n), ri = static_cast<int>(rows), ci = static_cast<int>(cols);
  const bool pdl = sm >= 90;
  if (path == fp8_path::cublaslt) {
    if (run_cublaslt(w_codes, w_scales, codes, scales_t, y, n_lt, rows, cols, ws + lt_workspace_offset(n, cols),
                     lt_workspace_size(n), stream)) {
      if (n_lt < n) {
        const int64_t k = padded_cols(cols), kbs = col_blocks(cols);
        launch_decode_any(w_codes, w_scales, codes + n_lt * k, scales + n_lt * kbs, y + n_lt * rows,
                          static_cast<int>(n - n_lt), ri, ci, stream, false);
      }
      return fp8_path::cublaslt;
    }
    path = fp8_path::mma;  // cuBLASLt offers no algorithm: the own kernel (the codes are all there)
  }
  if (path == fp8_path::decode) {
    launch_decode_any(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream, pdl);
    return path;
  }
  // Tile shapes by batch size; any choice gives the same bits (the summation order is fixed).
  if (n <= 8)
    launch_gemm<1, 1, 1>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // 16 rows x 8 tokens
  else if (n <= 32)
    launch_gemm<1, 4, 2>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // 32 rows x 32 tokens
  else
    launch_gemm<2, 2, 2>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // 64 rows x 16 tokens
  check_cuda(cudaGetLastError(), "matmul_fp8_block: launch");
  return fp8_path::mma;
}

}  // namespace troupe::kernels::cuda
