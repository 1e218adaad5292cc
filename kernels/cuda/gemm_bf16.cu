// The cuBLAS BF16 GEMM of kernels/cuda/gemm.hpp: the baseline the FP8 GEMM is measured against.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/gemm.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels::cuda {
namespace {
void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw_error(s == CUBLAS_STATUS_NOT_INITIALIZED ? errc::unsupported : errc::internal,
              std::string(what) + ": " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}
}  // namespace

blas_handle::blas_handle() {
  cublasHandle_t h = nullptr;
  check_blas(cublasCreate(&h), "cublasCreate (is there a CUDA device?)");
  handle_ = h;
}

blas_handle::~blas_handle() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void blas_handle::set_workspace(void* device_ptr, size_t bytes) {
  check_blas(cublasSetWorkspace(static_cast<cublasHandle_t>(handle_), device_ptr, bytes), "cublasSetWorkspace");
}

void matmul_bf16_cublas(const blas_handle& blas, const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows,
                        int64_t cols, float* y, stream_t stream) {
  if (n <= 0 || rows <= 0 || cols <= 0 || n >= (int64_t{1} << 31) || rows >= (int64_t{1} << 31) ||
      cols >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "matmul_bf16_cublas: n, rows, cols must be in [1, 2^31)");
  auto h = static_cast<cublasHandle_t>(blas.get());
  check_blas(cublasSetStream(h, stream), "cublasSetStream");
  // Column-major view: y^T [rows, n] = (w as [cols, rows])^T · (x as [cols, n]).
  const float alpha = 1.0f, beta = 0.0f;
  check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                          static_cast<int>(cols), &alpha, w, CUDA_R_16BF, static_cast<int>(cols), x, CUDA_R_16BF,
                          static_cast<int>(cols), &beta, y, CUDA_R_32F, static_cast<int>(rows), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx (bf16 x bf16 -> f32)");
}

}  // namespace troupe::kernels::cuda
