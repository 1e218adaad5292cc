// kernels::matmul: checks the call, picks the instruction set once at start-up (TROUPE_ISA may
// force a lower one) and spreads units of weight rows over the OpenMP threads. A result never
// depends on the split (matmul_backend.hpp), so units are handed out dynamically: a core slowed by
// a neighbour simply takes fewer.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "kernels/cpu/matmul_backend.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/cpu/matmul_quant.hpp"
#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"

namespace troupe::kernels {
namespace {

struct isa_choice {
  const cpu::matmul_backend* backend = nullptr;
  std::string error;  // set when TROUPE_ISA asks for something this CPU or build cannot do
  bool amx = false;   // bf16 compute, and f32 compute of BF16 weights, on the AMX tiles (auto where
                      // usable, or TROUPE_ISA=amx)
};

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}
bool cpu_has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

isa_choice choose_isa() {
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  const char* env = std::getenv("TROUPE_ISA");
  const std::string want = env ? env : "";
  if (want.empty() || want == "auto")
    return {avx512 ? &cpu::matmul_backend_avx512() : avx2 ? &cpu::matmul_backend_avx2() : &cpu::matmul_backend_generic(),
            {}, avx512 && cpu::amx_usable()};
  if (want == "amx" && avx512 && cpu::amx_usable()) return {&cpu::matmul_backend_avx512(), {}, true};
  if (want == "amx")
    return {nullptr, "TROUPE_ISA=amx but this CPU or kernel does not offer AMX-BF16 tiles (CPUID AMX-TILE and "
                     "AMX-BF16, AVX-512, and Linux 5.16+ granting the tile state)"};
  if (want == "avx512" && avx512) return {&cpu::matmul_backend_avx512(), {}};
  if (want == "avx2" && avx2) return {&cpu::matmul_backend_avx2(), {}};
  if (want == "generic") return {&cpu::matmul_backend_generic(), {}};
  if (want == "avx512" || want == "avx2")
    return {nullptr, "TROUPE_ISA=" + want + " but this CPU lacks it (it has " +
                         (avx512 ? "avx512" : avx2 ? "avx2" : "neither AVX2+FMA+F16C nor AVX-512") + ")"};
  return {nullptr, "TROUPE_ISA=" + want + " is not one of auto, amx, avx512, avx2, generic"};
}

const isa_choice& chosen_isa() {
  static const isa_choice choice = choose_isa();
  return choice;
}

// f32 compute of BF16 weights on the AMX tiles (f32_arithmetic() == "amx"): wherever bf16 compute
// uses them, on a valid TROUPE_ISA.
bool f32_on_tiles() { return chosen_isa().backend && chosen_isa().amx; }

// bf16 compute (kernels.hpp): the AMX tiles where usable (unless TROUPE_ISA=avx512 or lower), else
// vdpbf16ps where the CPU has AVX512_BF16 and TROUPE_ISA allows AVX-512, else the portable
// emulation (vdpbf16ps's bits, slowly).
const cpu::matmul_bf16_backend& bf16_backend() {
  static const cpu::matmul_bf16_backend* b = [] {
    const auto& c = chosen_isa();
    if (c.amx) return &cpu::matmul_bf16_backend_amx();
    const bool avx512 = c.backend == &cpu::matmul_backend_avx512() && __builtin_cpu_supports("avx512bf16");
    return avx512 ? &cpu::matmul_bf16_backend_avx512() : &cpu::matmul_bf16_backend_portable();
  }();
  return *b;
}

struct aligned_buffer {
  void* p = nullptr;
  size_t bytes = 0;
  ~aligned_buffer() { std::free(p); }
  void* get(size_t want) {
    const size_t need = (want + 63) / 64 * 64;
    if (need > bytes) {
      std::free(p);
      p = std::aligned_alloc(64, need);
      bytes = p ? need : 0;
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
};

// One 64-byte-aligned buffer per thread, grown on demand and kept for the next call.
float* thread_scratch(size_t floats) {
  thread_local aligned_buffer b;
  return static_cast<float*>(b.get(floats * sizeof(float)));
}

// The calling thread's bf16 copy of x (bf16 compute), shared by the team during one call.
uint16_t* activation_buffer(size_t elems) {
  thread_local aligned_buffer b;
  return static_cast<uint16_t*>(b.get(elems * sizeof(uint16_t)));
}

bool quantized(dtype t) { return t == dtype::i8 || t == dtype::u4 || t == dtype::f8_e4m3; }

// Checks a call; false when there is nothing to compute. Quantized weights run through the same
// back-ends, which widen each code to value * scale (matmul_quant.hpp).
bool check_call(const float* x, int64_t n, const weight_ref& w, float* y) {
  if (quantized(w.type))
    cpu::check_quantized_weight(w);
  else if (w.type != dtype::f32 && w.type != dtype::bf16 && w.type != dtype::f16)
    throw_error(errc::unsupported, "matmul: weight dtype " + std::string(to_string(w.type)) +
                                       " is not supported (expected F32, BF16 or F16)");
  if (n < 0 || w.rows < 0 || w.cols < 0)
    throw_error(errc::invalid_argument, "matmul: negative shape n=" + std::to_string(n) +
                                            " rows=" + std::to_string(w.rows) + " cols=" + std::to_string(w.cols));
  if (n == 0 || w.rows == 0) return false;
  if (!y || (w.cols > 0 && (!x || !w.data)))
    throw_error(errc::invalid_argument, "matmul: null x, y or weight data for n=" + std::to_string(n) + " [" +
                                            std::to_string(w.rows) + "x" + std::to_string(w.cols) + "]");
  if (!chosen_isa().backend) throw_error(errc::invalid_argument, "matmul: " + chosen_isa().error);
  if (w.cols == 0) {  // an empty dot product is +0
    std::memset(y, 0, static_cast<size_t>(n * w.rows) * sizeof(float));
    return false;
  }
  return true;
}

// Threads cost a few microseconds to wake: not worth it below ~100k multiply-adds.
bool worth_threads(int64_t units, int64_t macs) { return units > 1 && macs >= (int64_t{1} << 17); }

// One call's products, each cut into units of weight rows and numbered one after the other, so a
// thread's next unit may be any product's.
struct unit_plan {
  struct part {
    weight_ref w;
    float* y;
    int64_t unit, first;  // rows per unit; the index of its first unit
  };
  part parts[max_matmul_outs];
  int count = 0;
  int64_t units = 0, macs = 0;

  void add(const weight_ref& w, float* y, int64_t n, int64_t unit) {
    parts[count++] = {w, y, unit, units};
    units += (w.rows + unit - 1) / unit;
    macs += n * w.rows * w.cols;
  }
  // Product and rows [j0, j1) of unit u.
  const part& locate(int64_t u, int64_t& j0, int64_t& j1) const {
    int i = count - 1;
    while (parts[i].first > u) --i;
    j0 = (u - parts[i].first) * parts[i].unit;
    j1 = std::min(j0 + parts[i].unit, parts[i].w.rows);
    return parts[i];
  }
};

// Checks every product (check_call) and the shared width; false when none has anything to compute.
bool check_outs(const float* x, int64_t n, std::span<const matmul_out> outs) {
  if (outs.size() > max_matmul_outs)
    throw_error(errc::invalid_argument, "matmul: " + std::to_string(outs.size()) + " products in one call (at most " +
                                            std::to_string(max_matmul_outs) + ")");
  for (const auto& o : outs)
    if (o.w.cols != outs[0].w.cols)
      throw_error(errc::invalid_argument, "matmul: products of one x need one width, got " +
                                              std::to_string(outs[0].w.cols) + " and " + std::to_string(o.w.cols) +
                                              " columns");
  bool any = false;
  for (const auto& o : outs) any = check_call(x, n, o.w, o.y) || any;
  return any;
}

void matmul_f32(const float* x, int64_t n, std::span<const matmul_out> outs) {
  if (!check_outs(x, n, outs)) return;
  const cpu::matmul_backend& b = *chosen_isa().backend;
  unit_plan plan;
  size_t scratch = 0;
  for (const auto& o : outs) {
    if (o.w.rows == 0) continue;  // nothing to write (cols == 0 for all: check_outs wrote the zeros)
    plan.add(o.w, o.y, n, b.unit_rows(n, o.w));
    scratch = std::max(scratch, b.scratch_floats(n, o.w));
  }
  std::exception_ptr failure;
#pragma omp parallel if (worth_threads(plan.units, plan.macs))
  {
    float* buf = nullptr;
    try {
      buf = scratch ? thread_scratch(scratch) : nullptr;
    } catch (...) {
#pragma omp critical(troupe_matmul_failure)
      failure = std::current_exception();
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < plan.units; ++u) {
      if (scratch && !buf) continue;
      int64_t j0 = 0, j1 = 0;
      const auto& p = plan.locate(u, j0, j1);
      b.run(x, n, p.w, j0, j1, p.y, buf);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Products of BF16 weights (every one of them: the caller sorts them out) on a back-end that packs
// x once per call for the whole team: bf16 compute, or f32 compute on the AMX tiles.
void matmul_packed_x(const cpu::matmul_bf16_backend& b, const float* x, int64_t n, std::span<const matmul_out> outs) {
  if (!check_outs(x, n, outs)) return;
  const int64_t cols = outs[0].w.cols, ldx = cpu::bf16_padded_cols(cols), unit = b.unit_rows(n);
  unit_plan plan;
  for (const auto& o : outs)
    if (o.w.rows > 0) plan.add(o.w, o.y, n, unit);
  const int64_t groups = (n + b.pack_rows - 1) / b.pack_rows;
  uint16_t* xb = activation_buffer(b.pack ? b.xb_elems(n, cols) : static_cast<size_t>(n * ldx));
  const size_t scratch = b.scratch_elems ? b.scratch_elems(n, cols) : 0;  // every w has these cols
  std::exception_ptr failure;
#pragma omp parallel if (worth_threads(plan.units, plan.macs))
  {
    uint16_t* buf = nullptr;
    try {
      buf = scratch ? reinterpret_cast<uint16_t*>(thread_scratch((scratch + 1) / 2)) : nullptr;
    } catch (...) {
#pragma omp critical(troupe_matmul_failure)
      failure = std::current_exception();
    }
    // x rounded once per call (not per weight row), by the whole team; the barrier at the end of
    // this loop publishes it before any unit starts.
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      if (b.pack) {
        b.pack(x, n, cols, xb, g);
        continue;
      }
      const float* src = x + g * cols;
      uint16_t* dst = xb + g * ldx;
      for (int64_t k = 0; k < cols; ++k) dst[k] = f32_to_bf16(src[k]);
      for (int64_t k = cols; k < ldx; ++k) dst[k] = 0;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < plan.units; ++u) {
      if (scratch && !buf) continue;
      try {
        int64_t j0 = 0, j1 = 0;
        const auto& p = plan.locate(u, j0, j1);
        b.run(xb, n, p.w, j0, j1, p.y, buf);
      } catch (...) {
#pragma omp critical(troupe_matmul_failure)
        failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

std::vector<const cpu::matmul_backend*> cpu::runnable_matmul_backends() {
  std::vector<const matmul_backend*> out{&matmul_backend_generic()};
  if (cpu_has_avx2()) out.push_back(&matmul_backend_avx2());
  if (cpu_has_avx512()) out.push_back(&matmul_backend_avx512());
  return out;
}

const char* matmul_isa() noexcept {
  const auto& c = chosen_isa();
  return c.backend ? c.backend->name : "invalid";
}

const char* matmul_bf16_isa() noexcept { return chosen_isa().backend ? bf16_backend().name : "invalid"; }

const char* bf16_arithmetic() noexcept { return std::string_view(matmul_bf16_isa()) == "amx" ? "amx" : "vdpbf16ps"; }

const char* f32_arithmetic() noexcept { return f32_on_tiles() ? "amx" : "fma"; }

const char* quant_arithmetic() noexcept { return "dequant"; }

void matmul(const float* x, int64_t n, const weight_ref& w, float* y) {
  matmul(x, n, w, y, compute_dtype::f32);
}

void matmul(const float* x, int64_t n, const weight_ref& w, float* y, compute_dtype compute) {
  const matmul_out one{w, y};
  matmul(x, n, {&one, 1}, compute);
}

// bf16 compute, and f32 compute on the AMX tiles, apply to BF16 weights only: a mixed call runs its
// BF16 products in one region and the others in another.
void matmul(const float* x, int64_t n, std::span<const matmul_out> outs, compute_dtype compute) {
  const bool tiles_f32 = compute == compute_dtype::f32 && f32_on_tiles();
  if ((compute == compute_dtype::f32 && !tiles_f32) || outs.size() > max_matmul_outs)
    return matmul_f32(x, n, outs);  // (the latter throws)
  matmul_out bf16[max_matmul_outs], other[max_matmul_outs];
  size_t nb = 0, no = 0;
  for (const auto& o : outs) (o.w.type == dtype::bf16 ? bf16[nb++] : other[no++]) = o;
  if (no > 0) matmul_f32(x, n, {other, no});
  if (nb == 0) return;
  const cpu::matmul_bf16_backend& b = tiles_f32 ? cpu::matmul_f32_backend_amx() : bf16_backend();
  // Rows in slabs: the packed copy of x (three bf16 planes on the tiles: 1.5x x's own bytes) stays
  // at most slab_rows rows and the thread's buffer never grows past that for a long prompt. Each
  // output is its own row's, whichever slab or layout computes it, so the bits do not change.
  constexpr int64_t slab_rows = 512;
  if (n <= slab_rows) return matmul_packed_x(b, x, n, {bf16, nb});
  const int64_t cols = bf16[0].w.cols;
  for (int64_t i0 = 0; i0 < n; i0 += slab_rows) {
    matmul_out slab[max_matmul_outs];
    for (size_t i = 0; i < nb; ++i) slab[i] = {bf16[i].w, bf16[i].y ? bf16[i].y + i0 * bf16[i].w.rows : nullptr};
    matmul_packed_x(b, x ? x + i0 * cols : nullptr, std::min(slab_rows, n - i0), {slab, nb});
  }
}

}  // namespace troupe::kernels
