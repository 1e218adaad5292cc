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
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

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

template <class T>
__global__ void quantize_kernel(const T* __restrict__ x, int n, int cols, int kb_count, int kpad,
                                uint8_t* __restrict__ codes, float* __restrict__ scales) {
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
  if (lane == 0) scales[token * kb_count + kb] = s;
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

void check_device() {
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "matmul_fp8_block: no usable CUDA device (cudaGetDevice)");
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute");
  if (major * 10 + minor < 89)
    throw_error(errc::unsupported, "matmul_fp8_block needs FP8 tensor cores (sm_89 or newer); device " +
                                       std::to_string(dev) + " is sm_" + std::to_string(major * 10 + minor));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

size_t fp8_scales_offset(int64_t n, int64_t cols) {
  return (static_cast<size_t>(n) * padded_cols(cols) + 15) / 16 * 16;
}

size_t fp8_workspace_bytes(int64_t n, int64_t cols) {
  return fp8_scales_offset(n, cols) + static_cast<size_t>(n) * col_blocks(cols) * sizeof(float);
}

void quantize_activations_fp8(const void* x, act_type x_type, int64_t n, int64_t cols, void* workspace,
                              stream_t stream) {
  if (n <= 0 || cols <= 0 || cols % 16 != 0 || n * padded_cols(cols) >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "quantize_activations_fp8: need n >= 1 and cols a positive multiple of 16 "
                                        "with n * cols < 2^31; got n " + std::to_string(n) + ", cols " +
                                            std::to_string(cols));
  if (!aligned16(x) || !aligned16(workspace))
    throw_error(errc::invalid_argument, "quantize_activations_fp8: x and workspace must be 16-byte aligned");
  const int kb_count = static_cast<int>(col_blocks(cols));
  auto* codes = static_cast<uint8_t*>(workspace);
  auto* scales = reinterpret_cast<float*>(codes + fp8_scales_offset(n, cols));
  constexpr int kWarps = 8;
  const int64_t groups = n * kb_count;
  const unsigned blocks = static_cast<unsigned>((groups + kWarps - 1) / kWarps);
  if (x_type == act_type::f32)
    quantize_kernel<<<blocks, 32 * kWarps, 0, stream>>>(static_cast<const float*>(x), static_cast<int>(n),
                                                        static_cast<int>(cols), kb_count,
                                                        static_cast<int>(padded_cols(cols)), codes, scales);
  else
    quantize_kernel<<<blocks, 32 * kWarps, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<int>(n),
                                                        static_cast<int>(cols), kb_count,
                                                        static_cast<int>(padded_cols(cols)), codes, scales);
  check_cuda(cudaGetLastError(), "quantize_activations_fp8: launch");
}

void matmul_fp8_block(const void* x, act_type x_type, int64_t n, const uint8_t* w_codes, const float* w_scales,
                      int64_t rows, int64_t cols, float* y, void* workspace, stream_t stream) {
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
  check_device();
  quantize_activations_fp8(x, x_type, n, cols, workspace, stream);
  const auto* codes = static_cast<const uint8_t*>(workspace);
  const auto* scales = reinterpret_cast<const float*>(codes + fp8_scales_offset(n, cols));
  const int ni = static_cast<int>(n), ri = static_cast<int>(rows), ci = static_cast<int>(cols);
  // Tile shapes by batch size; any choice gives the same bits (the summation order is fixed).
  if (n <= 8)
    launch_gemm<1, 1, 1>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // decode: 16 rows x 8 tokens
  else if (n <= 32)
    launch_gemm<1, 4, 2>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // 32 rows x 32 tokens
  else
    launch_gemm<2, 2, 2>(w_codes, w_scales, codes, scales, y, ni, ri, ci, stream);  // 64 rows x 16 tokens
  check_cuda(cudaGetLastError(), "matmul_fp8_block: launch");
}

}  // namespace troupe::kernels::cuda
