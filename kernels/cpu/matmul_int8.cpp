// The quantized half of kernels::matmul: checks the weight, prepares the activation rows once per
// call (30-bit fixed point for INT8, a zero-padded copy for FP8), picks the back-end once per
// process and spreads units of weight rows over the OpenMP threads (dynamically: results never
// depend on the split, matmul_int8.hpp).
#include "kernels/cpu/matmul_int8.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"

namespace troupe::kernels::cpu {
namespace {

// 64-byte-aligned buffer grown on demand and kept for the next call (one per thread).
template <class T>
T* grow(void*& p, size_t& have, size_t count) {
  const size_t need = (count * sizeof(T) + 63) / 64 * 64;
  if (need > have) {
    std::free(p);
    p = std::aligned_alloc(64, need);
    have = p ? need : 0;
    if (!p) throw std::bad_alloc();
  }
  return static_cast<T*>(p);
}

struct buffer {
  void* p = nullptr;
  size_t bytes = 0;
  ~buffer() { std::free(p); }
};

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

const quant_backend& best_quant_backend(dtype type) {
  // The instruction set matmul() chose (TROUPE_ISA may force a lower one or name a bad one).
  const std::string isa = matmul_isa();
  if (isa == "invalid")
    throw_error(errc::invalid_argument, "matmul: TROUPE_ISA names an instruction set this CPU or build cannot run");
  static const bool vnni = __builtin_cpu_supports("avx512vnni");
  const bool avx512 = isa == "avx512";
  if (type == dtype::f8_e4m3)
    return avx512 ? fp8_backend_avx512() : fp8_backend_generic();
  if (avx512) return vnni ? int8_backend_avx512_vnni() : int8_backend_avx512();
  return int8_backend_generic();
}

void check_quantized_weight(const weight_ref& w) {
  const std::string shape = "[" + std::to_string(w.rows) + "x" + std::to_string(w.cols) + "]";
  auto fail = [&](const std::string& why) {
    throw_error(errc::invalid_argument, "matmul: " + std::string(to_string(w.type)) + " weight " + shape + ": " + why);
  };
  if (w.type != dtype::i8 && w.type != dtype::f8_e4m3) fail("not a quantized dtype");
  if (!w.scales) fail("no scales (a quantized weight needs weight_scale / weight_scale_inv)");
  if (w.group_rows < 1 || w.group_cols < 1)
    fail("group shape " + std::to_string(w.group_rows) + "x" + std::to_string(w.group_cols) + " is not positive");
  if (w.type == dtype::i8) {
    if (w.group_rows != 1) fail("INT8 scales must be per output row (group_rows 1), got " + std::to_string(w.group_rows));
    if (w.group_cols < w.cols && (!is_pow2(w.group_cols) || w.group_cols < 32 || w.group_cols > 4096))
      fail("INT8 group_cols " + std::to_string(w.group_cols) +
           " must be a power of two in [32, 4096] or at least cols (one scale per row)");
  } else if (w.group_cols < w.cols && w.group_cols % 16 != 0) {
    fail("FP8 group_cols " + std::to_string(w.group_cols) + " must be a multiple of 16 or at least cols");
  }
}

namespace {

// The per-element half of quantize_activation_row, in plain loops the compiler vectorises for the
// best instruction set present (the scalar libm calls it replaced cost ~2% of an INT8 decode step).
// max |x[k]|, and whether every x[k] is finite, from the bit patterns: with the sign bit cleared,
// the unsigned order of the bits is the numeric order, and inf and NaN sort above every finite
// value. An integer max reduction vectorises; the float one it replaced (max and a NaN-detecting
// sum) ran scalar under IEEE semantics, ~1 us a call and 1% of an INT8 decode step, on one thread
// while the other waited.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float abs_max(const float* x, int64_t cols, bool& finite) {
  uint32_t m = 0;
  for (int64_t k = 0; k < cols; ++k) {
    const uint32_t b = std::bit_cast<uint32_t>(x[k]) & 0x7fffffffu;
    m = b > m ? b : m;
  }
  finite = m < 0x7f800000u;
  return std::bit_cast<float>(m);
}

// a = rint(x * 2^e), exact scaling (|a| < 2^30, 2^e a normal float) and round to nearest even,
// split as a = 32768 * hi + lo.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void scale_round_split(const float* x, int64_t cols, float pow2e, int16_t* hi, int16_t* lo) {
  for (int64_t k = 0; k < cols; ++k) {
    const auto a = static_cast<int32_t>(std::rint(x[k] * pow2e));
    hi[k] = static_cast<int16_t>(a >> 15);  // arithmetic shift: floor(a / 32768)
    lo[k] = static_cast<int16_t>(a & 0x7fff);
  }
}

}  // namespace

int32_t quantize_activation_row(const float* x, int64_t cols, int64_t stride, int16_t* hi, int16_t* lo) {
  bool finite = true;
  const float amax = abs_max(x, cols, finite);
  std::memset(hi, 0, static_cast<size_t>(stride) * sizeof(int16_t));
  std::memset(lo, 0, static_cast<size_t>(stride) * sizeof(int16_t));
  if (!finite) return kNonFinite;
  if (amax == 0.0f) return 0;
  int p = 0;
  std::frexp(amax, &p);  // amax in [2^(p-1), 2^p)
  const int32_t e = 30 - p;
  if (e <= 127) {  // 2^e is a normal float (e >= -99 always)
    scale_round_split(x, cols, std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23), hi, lo);
    return e;
  }
  for (int64_t k = 0; k < cols; ++k) {  // rows with amax < 2^-97: ldexp is exact where 2^e is not a float
    const int32_t a = static_cast<int32_t>(std::lrint(std::ldexp(x[k], e)));
    hi[k] = static_cast<int16_t>(a >> 15);
    lo[k] = static_cast<int16_t>(a & 0x7fff);
  }
  return e;
}

void matmul_quantized(const float* x, int64_t n, const weight_ref& w, float* y, const quant_backend& b) {
  check_quantized_weight(w);
  if (n < 0 || w.rows < 0 || w.cols < 0)
    throw_error(errc::invalid_argument, "matmul: negative shape n=" + std::to_string(n));
  if (n == 0 || w.rows == 0) return;
  if (!y || (w.cols > 0 && (!x || !w.data)))
    throw_error(errc::invalid_argument, "matmul: null x, y or weight data");
  if (w.cols == 0) {
    std::memset(y, 0, static_cast<size_t>(n * w.rows) * sizeof(float));
    return;
  }

  // Activations: prepared by the calling thread's buffers, shared read-only by the team.
  thread_local buffer act_buf, exp_buf;
  quant_activations a;
  a.n = n;
  a.cols = w.cols;
  a.stride = (w.cols + 31) / 32 * 32;
  const size_t plane = static_cast<size_t>(n * a.stride);
  std::exception_ptr failure;
  if (w.type == dtype::i8) {
    auto* planes = grow<int16_t>(act_buf.p, act_buf.bytes, 2 * plane);
    auto* exps = grow<int32_t>(exp_buf.p, exp_buf.bytes, static_cast<size_t>(n));
    a.hi = planes;
    a.lo = planes + plane;
    a.exp = exps;
#pragma omp parallel for schedule(static) if (n * w.cols >= (int64_t{1} << 16))
    for (int64_t i = 0; i < n; ++i)
      exps[i] = quantize_activation_row(x + i * w.cols, w.cols, a.stride, planes + i * a.stride,
                                        planes + plane + i * a.stride);
  } else {
    auto* xs = grow<float>(act_buf.p, act_buf.bytes, plane);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(xs + i * a.stride, x + i * w.cols, static_cast<size_t>(w.cols) * sizeof(float));
      std::fill(xs + i * a.stride + w.cols, xs + (i + 1) * a.stride, 0.0f);
    }
    a.x = xs;
  }

  // Units of weight rows taken by the threads in turn. Decode (n <= 3) streams 256 rows a unit:
  // each new unit starts streams afresh, and 64-row units measured 2-4% slower per token (0.6B
  // shape: 39.5 vs 40.5 tokens/s; 32 rows 37.3); 256 rows still leave q/k/v and down_proj 4-8
  // units to balance two threads. INT8 small batches (int8_passes_max_n) stream the same units, a
  // pass per three rows. A prefill unit is two 32-row panels.
  const int64_t unit = n <= 3 || (w.type == dtype::i8 && n <= int8_passes_max_n) ? 256 : 64;
  const int64_t units = (w.rows + unit - 1) / unit;
  const size_t scratch = b.scratch_floats(n, w);
  const bool parallel = units > 1 && n * w.rows * w.cols >= (int64_t{1} << 17);
#pragma omp parallel if (parallel)
  {
    thread_local buffer scratch_buf;
    const int64_t threads = omp_get_num_threads();
    float* buf = nullptr;
    try {
      buf = scratch ? grow<float>(scratch_buf.p, scratch_buf.bytes, scratch) : nullptr;
    } catch (...) {
#pragma omp critical(troupe_matmul_quant_failure)
      failure = std::current_exception();
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      if (scratch && !buf) continue;
      const int64_t j0 = u * unit, j1 = std::min(j0 + unit, w.rows);
      const int64_t pf0 = std::min((u + threads) * unit, w.rows), pf1 = std::min(pf0 + unit, w.rows);
      b.run(a, w, j0, j1, y, buf, pf0, pf1);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void matmul_quantized(const float* x, int64_t n, const weight_ref& w, float* y) {
  matmul_quantized(x, n, w, y, best_quant_backend(w.type));
}

void matmul_dequant_reference(const float* x, int64_t n, const weight_ref& w, float* y) {
  check_quantized_weight(w);
  const auto* codes = static_cast<const uint8_t*>(w.data);
  std::vector<double> row(static_cast<size_t>(w.cols));
  for (int64_t j = 0; j < w.rows; ++j) {
    for (int64_t k = 0; k < w.cols; ++k) {
      const uint8_t c = codes[j * w.cols + k];
      const double v = w.type == dtype::i8 ? static_cast<double>(static_cast<int8_t>(c)) : f8e4m3_to_f32(c);
      row[static_cast<size_t>(k)] = v * scale_of(w, j, k);
    }
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(x[i * w.cols + k]) * row[static_cast<size_t>(k)];
      y[i * w.rows + j] = static_cast<float>(acc);
    }
  }
}

}  // namespace troupe::kernels::cpu

namespace troupe::kernels {

float dequantized_at(const weight_ref& w, int64_t r, int64_t c) {
  // The dtype first: a float weight has no scales or groups to index (group_rows 0).
  if (w.type != dtype::i8 && w.type != dtype::f8_e4m3)
    throw_error(errc::invalid_argument, "dequantized_at: not a quantized weight");
  const uint8_t code = static_cast<const uint8_t*>(w.data)[r * w.cols + c];
  const float s = cpu::scale_of(w, r, c);
  return (w.type == dtype::i8 ? static_cast<float>(static_cast<int8_t>(code)) : f8e4m3_to_f32(code)) * s;
}

}  // namespace troupe::kernels
