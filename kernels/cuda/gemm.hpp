// CUDA GEMMs for linear layers, callable from plain C++ (no CUDA headers here): the FP8 block-scaled
// GEMM for Qwen's FP8 checkpoints (W8A8, tensor cores, sm_89+ / Hopper) and the cuBLAS BF16 GEMM it
// is measured against. Every pointer below is device memory; every call is asynchronous on `stream`.
//
// FP8 arithmetic (docs/cuda.md; the host reproduction is kernels/cuda/fp8_reference.hpp):
//   activations, per token and per group of 128 columns (the weight's block width):
//     sa = max|x| / 448 (float32 division), a = e4m3_rne_satfinite(x / sa)   (sa = 0, a = 0 if max|x| = 0)
//   weights: codes w and weight_scale_inv sw per 128 x 128 block, as the checkpoint stores them;
//   for output (token i, weight row r), per 128-deep column block kb:
//     p[kb] = sum over the block's columns of a * w    (tensor cores: exact products, accumulated in
//                                                      at least ~13 mantissa bits on Hopper)
//     acc[kb % 4] = fma(p[kb], sa[i][kb] * sw[r / 128][kb], acc[kb % 4])   in increasing kb
//     y[i][r] = (acc[0] + acc[1]) + (acc[2] + acc[3])
//   The order is fixed by the shape alone, so a row's result never depends on n or on which tile
//   computed it (batch invariance, kernels/kernels.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace troupe::kernels::cuda {

using stream_t = CUstream_st*;  // nullptr: the legacy default stream

enum class act_type { f32, bf16 };

// Which implementation computes matmul_fp8_block (docs/cuda.md, "The paths"):
//   decode:   own mma.sync kernel for small n: 16 weight rows x 8 or 16 tokens per 4 warps, several
//             128-column blocks of loads in flight per warp, launched with programmatic dependent
//             launch so the weight loads overlap the activation quantization
//   mma:      own mma.sync kernel with larger tiles (the first version; any n)
//   cublaslt: cuBLASLt's Hopper FP8 GEMM with 128 x 128 weight / 1 x 128 activation block scales
//             (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F / VEC128_32F), for prefill
//   automatic: n <= 16: decode; n >= kFp8CublasLtMinTokens, rows % 128 == 0 and cols % 512 == 0:
//             cublaslt; otherwise mma.
// decode and mma compute the same bits (same MMAs, same fixed summation order): a token's result
// is bitwise the same for every n. cublaslt is within the same error bound of the exact sum but
// not bitwise equal to them, and cuBLASLt may pick a different algorithm (and order) per n: the
// results of a token can change with n there (see docs/cuda.md).
enum class fp8_path { automatic, decode, mma, cublaslt };
const char* fp8_path_name(fp8_path p) noexcept;
inline constexpr int64_t kFp8CublasLtMinTokens = 64;

// Device workspace matmul_fp8_block needs for n activation rows of `cols` columns: the e4m3 codes
// [n, ceil(cols / 128) * 128] (zero-padded), the float32 scales [n, ceil(cols / 128)], the same
// scales token-major for cuBLASLt, then cuBLASLt's own workspace (32 MiB, only when
// n >= kFp8CublasLtMinTokens; smaller calls forced onto cublaslt give it none).
size_t fp8_workspace_bytes(int64_t n, int64_t cols);

// Quantizes activations as matmul_fp8_block does (formula above) into `workspace`:
//   x:      [n, cols] float32 or bf16 (`x_type`), row-major, device memory
//   codes:  workspace bytes [0, n * padded_cols): e4m3 [n, padded_cols], padded_cols = ceil(cols / 128) * 128
//   scales: the float32 [n, ceil(cols / 128)] that follow the codes (fp8_scales_offset bytes in)
// Exposed so tests can compare it bit for bit with the host reproduction.
size_t fp8_scales_offset(int64_t n, int64_t cols);
void quantize_activations_fp8(const void* x, act_type x_type, int64_t n, int64_t cols, void* workspace,
                              stream_t stream);

// y = x · wᵀ with FP8 block-scaled weights (Qwen's F8_E4M3 + weight_scale_inv, 128 x 128 blocks):
//   x:       [n, cols] float32 or bf16, row-major           n in [1, 2^31 / cols)
//   w_codes: [rows, cols] e4m3 bytes, row-major, 16-byte aligned
//   w_scales:[ceil(rows / 128), ceil(cols / 128)] float32 (weight_scale_inv)
//   y:       [n, rows] float32, row-major
//   workspace: fp8_workspace_bytes(n, cols) bytes of device memory (16-byte aligned), not shared
//              with a call in flight on another stream
// rows and cols: positive multiples of 16 (cols need not be a multiple of 128: the last block is
// short). Throws troupe::error: invalid_argument for other shapes or misaligned pointers,
// unsupported when there is no CUDA device or the current one is older than sm_89, internal for a
// CUDA launch error or a cuBLASLt failure. Does not synchronize.
// `path` picks the implementation (automatic: the rule above; the others force one, for tests and
// benchmarks). Returns the path that ran: cublaslt falls back to mma when the shape does not
// qualify (rows % 128, cols % 512, n >= 4) or cuBLASLt's heuristic offers no algorithm; with
// cublaslt, the last n % 4 tokens run through the decode kernel (cuBLASLt wants the token count
// a multiple of 4). The cuBLASLt handle is process-wide (created on first use, for the current
// device); w_codes, w_scales and y should be 16-byte aligned there.
fp8_path matmul_fp8_block(const void* x, act_type x_type, int64_t n, const uint8_t* w_codes, const float* w_scales,
                          int64_t rows, int64_t cols, float* y, void* workspace, stream_t stream,
                          fp8_path path = fp8_path::automatic);

// The BF16 baseline: y = x · wᵀ through cuBLAS (cublasGemmEx, bf16 inputs, fp32 output and compute).
//   x: [n, cols] bf16, w: [rows, cols] bf16, y: [n, rows] float32; all row-major device memory.
class blas_handle {
 public:
  blas_handle();  // throws troupe::error (unsupported) when cuBLAS cannot start (no device)
  ~blas_handle();
  blas_handle(const blas_handle&) = delete;
  blas_handle& operator=(const blas_handle&) = delete;
  void* get() const noexcept { return handle_; }
  // Gives cuBLAS `bytes` of device memory to work in (cublasSetWorkspace), as CUDA graph capture
  // needs: cuBLAS must not allocate while a stream is being captured.
  void set_workspace(void* device_ptr, size_t bytes);

 private:
  void* handle_ = nullptr;
};
void matmul_bf16_cublas(const blas_handle& blas, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                        int64_t cols, float* y, stream_t stream);

}  // namespace troupe::kernels::cuda
