// quantize_int8 / quantize_fp8: rows (INT8) or row blocks (FP8) in parallel; each row is widened
// to float32 once in a thread-local buffer, then reduced and rounded in plain loops GCC vectorises.
#include "runtime/quant/quantize.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/core/mapped_file.hpp"

namespace troupe::quant {
namespace {

// Quantized weights go into 2 MB-aligned slabs advised MADV_HUGEPAGE, however the checkpoint was
// loaded: decode streams them every token (INT8 batch 1 read 28.3-29.0 tok/s from the heap's 4 KB
// pages, 33.8-34.9 from these; AMX Xeon, docs/benchmarks.md 2026-12-06). Small tensors share a
// 64 MB slab (a slab lives while any of its tensors does), large ones get their own.
std::shared_ptr<char> huge_page_slab(size_t bytes) {
  return std::reinterpret_pointer_cast<char>(huge_page_buffer(bytes, "quantized weights"));
}

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  constexpr size_t slab_bytes = size_t{64} << 20;
  if (bytes > slab_bytes / 4) return huge_page_slab(bytes);
  static std::mutex mutex;
  static std::weak_ptr<char> current;
  static size_t used = 0;
  std::lock_guard lock(mutex);
  std::shared_ptr<char> slab = current.lock();
  if (!slab || used + bytes > slab_bytes) {
    slab = huge_page_slab(slab_bytes);
    current = slab;
    used = 0;
  }
  char* p = slab.get() + used;
  used += bytes;
  return std::shared_ptr<void>(slab, p);  // shares the slab's ownership
}

void check_float(const kernels::weight_ref& w, const char* what) {
  if (w.type != dtype::f32 && w.type != dtype::bf16 && w.type != dtype::f16)
    throw_error(errc::invalid_argument, std::string(what) + ": weight dtype " + std::string(to_string(w.type)) +
                                            " is not a float dtype (expected F32, BF16 or F16)");
  if (w.rows < 0 || w.cols < 0 || (w.rows * w.cols > 0 && !w.data))
    throw_error(errc::invalid_argument, std::string(what) + ": malformed weight");
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void widen_row(const kernels::weight_ref& w, int64_t r, float* out) {
  const int64_t n = w.cols;
  if (w.type == dtype::f32) {
    std::memcpy(out, static_cast<const float*>(w.data) + r * n, static_cast<size_t>(n) * sizeof(float));
  } else if (w.type == dtype::bf16) {
    const auto* s = static_cast<const uint16_t*>(w.data) + r * n;
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(s[i]);
  } else {
    const auto* s = static_cast<const uint16_t*>(w.data) + r * n;
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(s[i]);
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float abs_max(const float* v, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
  return m;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void round_int8(const float* v, int64_t n, float scale, int8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(v[i] / scale);  // ties to even (default rounding mode)
    out[i] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, q)));
  }
}

struct row_buffer {
  std::vector<float> v;
  float* get(int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v.data();
  }
};

}  // namespace

std::shared_ptr<void> quantized_buffer(size_t bytes) { return aligned_buffer(bytes); }

float float_weight_at(const kernels::weight_ref& w, int64_t r, int64_t c) {
  const int64_t i = r * w.cols + c;
  switch (w.type) {
    case dtype::f32: return static_cast<const float*>(w.data)[i];
    case dtype::bf16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    case dtype::f16: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    default: throw_error(errc::invalid_argument, "float_weight_at: not a float weight");
  }
}

quantized_weight quantize_int8(const kernels::weight_ref& w, int32_t group_size) {
  check_float(w, "quantize_int8");
  if (group_size != 0 && (group_size < 32 || group_size > 4096 || (group_size & (group_size - 1)) != 0))
    throw_error(errc::invalid_argument, "quantize_int8: group size " + std::to_string(group_size) +
                                            " is not a power of two in [32, 4096] (or 0: one scale per row)");
  quantized_weight q;
  q.ref = {nullptr, dtype::i8, w.rows, w.cols};
  q.ref.group_rows = 1;
  q.ref.group_cols = static_cast<int32_t>(int8_group_cols(group_size, w.cols));
  auto codes = aligned_buffer(static_cast<size_t>(w.rows * w.cols));
  auto scales = aligned_buffer(q.ref.scale_bytes());
  auto* c = static_cast<int8_t*>(codes.get());
  auto* s = static_cast<float*>(scales.get());
  const int64_t g = q.ref.group_cols, groups = q.ref.scale_cols();
#pragma omp parallel
  {
    thread_local row_buffer buf;
    float* row = buf.get(w.cols);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < w.rows; ++r) {
      widen_row(w, r, row);
      for (int64_t k = 0; k < groups; ++k) {
        const int64_t c0 = k * g, len = std::min(g, w.cols - c0);
        const float amax = abs_max(row + c0, len);
        const float scale = amax / 127.0f;
        s[r * groups + k] = scale;
        if (scale == 0.0f) {
          std::memset(c + r * w.cols + c0, 0, static_cast<size_t>(len));
        } else {
          round_int8(row + c0, len, scale, c + r * w.cols + c0);
        }
      }
    }
  }
  q.ref.data = codes.get();
  q.ref.scales = s;
  q.codes = codes;
  q.scales = scales;
  return q;
}

quantized_weight quantize_fp8(const kernels::weight_ref& w, int32_t block_rows, int32_t block_cols) {
  check_float(w, "quantize_fp8");
  if (block_rows <= 0 || block_cols <= 0 || block_cols % 16 != 0)
    throw_error(errc::invalid_argument, "quantize_fp8: block " + std::to_string(block_rows) + "x" +
                                            std::to_string(block_cols) + " (cols must be a positive multiple of 16)");
  quantized_weight q;
  q.ref = {nullptr, dtype::f8_e4m3, w.rows, w.cols};
  q.ref.group_rows = block_rows;
  q.ref.group_cols = block_cols;
  auto codes = aligned_buffer(static_cast<size_t>(w.rows * w.cols));
  auto scales = aligned_buffer(q.ref.scale_bytes());
  auto* c = static_cast<uint8_t*>(codes.get());
  auto* s = static_cast<float*>(scales.get());
  const int64_t srows = q.ref.scale_rows(), scols = q.ref.scale_cols();
#pragma omp parallel
  {
    thread_local row_buffer buf;
    std::vector<float> amax(static_cast<size_t>(scols));
#pragma omp for schedule(dynamic, 1)
    for (int64_t br = 0; br < srows; ++br) {
      const int64_t r0 = br * block_rows, r1 = std::min<int64_t>(w.rows, r0 + block_rows);
      float* block = buf.get((r1 - r0) * w.cols);
      std::fill(amax.begin(), amax.end(), 0.0f);
      for (int64_t r = r0; r < r1; ++r) {
        float* row = block + (r - r0) * w.cols;
        widen_row(w, r, row);
        for (int64_t k = 0; k < scols; ++k) {
          const int64_t c0 = k * block_cols, len = std::min<int64_t>(block_cols, w.cols - c0);
          amax[static_cast<size_t>(k)] = std::max(amax[static_cast<size_t>(k)], abs_max(row + c0, len));
        }
      }
      for (int64_t k = 0; k < scols; ++k) s[br * scols + k] = amax[static_cast<size_t>(k)] / 448.0f;
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = block + (r - r0) * w.cols;
        for (int64_t col = 0; col < w.cols; ++col) {
          const float scale = s[br * scols + col / block_cols];
          c[r * w.cols + col] = scale == 0.0f ? 0 : f32_to_f8e4m3(row[col] / scale);
        }
      }
    }
  }
  q.ref.data = codes.get();
  q.ref.scales = s;
  q.codes = codes;
  q.scales = scales;
  return q;
}

}  // namespace troupe::quant
