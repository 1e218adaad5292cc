// Read-bandwidth and FMA-peak probes, one per instruction set, chosen at run time like the kernels.
#include "bench/machine/machine_limits.hpp"

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/matmul_bf16.hpp"  // amx_usable, configure_amx_tiles

namespace troupe::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

bool has_avx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx512_bf16() { return has_avx512() && __builtin_cpu_supports("avx512bf16"); }

// ---- read bandwidth: XOR every cache line into 8 accumulators so the loads cannot be dropped ----

__attribute__((target("avx512f"))) uint64_t read_avx512(const char* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i + 512 <= bytes; i += 512) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 192));
    a4 = _mm512_xor_si512(a4, _mm512_load_si512(p + i + 256));
    a5 = _mm512_xor_si512(a5, _mm512_load_si512(p + i + 320));
    a6 = _mm512_xor_si512(a6, _mm512_load_si512(p + i + 384));
    a7 = _mm512_xor_si512(a7, _mm512_load_si512(p + i + 448));
  }
  __m512i s = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)),
                               _mm512_xor_si512(_mm512_xor_si512(a4, a5), _mm512_xor_si512(a6, a7)));
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  return lanes[0] ^ lanes[3] ^ lanes[7];
}

__attribute__((target("avx2"))) uint64_t read_avx2(const char* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
#define at(o) _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + (o)))
    a0 = _mm256_xor_si256(a0, at(0));
    a1 = _mm256_xor_si256(a1, at(32));
    a2 = _mm256_xor_si256(a2, at(64));
    a3 = _mm256_xor_si256(a3, at(96));
    a4 = _mm256_xor_si256(a4, at(128));
    a5 = _mm256_xor_si256(a5, at(160));
    a6 = _mm256_xor_si256(a6, at(192));
    a7 = _mm256_xor_si256(a7, at(224));
#undef at
  }
  __m256i s = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)),
                               _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7)));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] ^ lanes[3];
}

uint64_t read_generic(const char* p, size_t bytes) {
  const auto* q = reinterpret_cast<const uint64_t*>(p);
  uint64_t a[8] = {};
  for (size_t i = 0; i + 8 <= bytes / 8; i += 8)
    for (int l = 0; l < 8; ++l) a[l] ^= q[i + l];
  return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

uint64_t read_best(const char* p, size_t bytes) {
  if (has_avx512()) return read_avx512(p, bytes);
  if (has_avx2()) return read_avx2(p, bytes);
  return read_generic(p, bytes);
}

// ---- FMA peak: 16 independent chains per thread (enough to cover 4-cycle latency on 2 ports) ----

constexpr int64_t fma_iters = 20'000'000;

#define TROUPE_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15)

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
#define DECL(i) __m512 a##i = _mm512_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, b, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  const __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-7f);
  TROUPE_CHAINS(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TROUPE_CHAINS(STEP)
  }
  __m512 s = _mm512_setzero_ps();
  TROUPE_CHAINS(SUM)
  alignas(64) float l[16];
  _mm512_store_ps(l, s);
  return l[0] + l[15];
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx512f,avx512bf16"))) float dpbf16_avx512(int64_t iters) {
#define DECL(i) __m512 a##i = _mm512_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, b, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  const __m512bh c = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  TROUPE_CHAINS(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TROUPE_CHAINS(STEP)
  }
  __m512 s = _mm512_setzero_ps();
  TROUPE_CHAINS(SUM)
  alignas(64) float l[16];
  _mm512_store_ps(l, s);
  return l[0] + l[15];
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
#define DECL(i) __m256 a##i = _mm256_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, b, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
  const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-7f);
  TROUPE_CHAINS(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TROUPE_CHAINS(STEP)
  }
  __m256 s = _mm256_setzero_ps();
  TROUPE_CHAINS(SUM)
  alignas(32) float l[8];
  _mm256_store_ps(l, s);
  return l[0] + l[7];
#undef DECL
#undef STEP
#undef SUM
}

// SSE without FMA (the x86-64-v2 baseline): a multiply and an add count as one FMA's 2 flops.
float fma_generic(int64_t iters) {
#define DECL(i) __m128 a##i = _mm_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, b), c);
#define SUM(i) s = _mm_add_ps(s, a##i);
  const __m128 b = _mm_set1_ps(0.9999f), c = _mm_set1_ps(1e-7f);
  TROUPE_CHAINS(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TROUPE_CHAINS(STEP)
  }
  __m128 s = _mm_setzero_ps();
  TROUPE_CHAINS(SUM)
  return _mm_cvtss_f32(s);
#undef DECL
#undef STEP
#undef SUM
}
#undef TROUPE_CHAINS

struct aligned_free {
  void operator()(char* p) const noexcept { std::free(p); }
};

}  // namespace

const char* machine_isa() noexcept {
  if (has_avx512()) return "avx512";
  if (has_avx2()) return "avx2";
  return "generic";
}

double now_seconds(timing clock) {
  if (clock == timing::thread_cpu) return thread_cpu_seconds();
  return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
}

namespace {

// Best of six passes, in GB/s, in which thread t reads [start + t * share, start + (t + 1) * share)
// of every (start, share) part.
double best_read_gbs(const std::vector<std::pair<const char*, size_t>>& parts, int threads, timing clock) {
  size_t total = 0;
  for (const auto& [start, share] : parts) total += share * static_cast<size_t>(threads);
  if (total == 0) return 0;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 6; ++pass) {
    const double t0 = now_seconds(clock);
    uint64_t acc = 0;
#pragma omp parallel num_threads(threads) reduction(^ : acc)
    for (const auto& [start, share] : parts) acc ^= read_best(start + share * omp_get_thread_num(), share);
    const double s = now_seconds(clock) - t0;
    sink = sink ^ acc;
    best = std::max(best, static_cast<double>(total) / s / 1e9);
  }
  return best;
}

}  // namespace

double measure_read_bandwidth_gbs(int threads, timing clock, bool huge_pages) {
  threads = std::max(threads, 1);
  if (threads > 1) clock = timing::wall;  // other threads' CPU time is not the caller's
  // 1 GiB, or 4x the last-level cache when that is larger: every pass comes from DRAM.
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t bytes = std::max<size_t>(size_t{1} << 30, llc > 0 ? 4 * static_cast<size_t>(llc) : 0);
  constexpr size_t huge = size_t{2} << 20;
  bytes = bytes / (huge * threads) * (huge * threads);
  std::unique_ptr<char, aligned_free> buf(static_cast<char*>(std::aligned_alloc(huge, bytes)));
  // Before the first touch: the kernel picks the page size when it faults the pages in.
  madvise(buf.get(), bytes, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  const size_t share = bytes / threads;
  // Each thread first-touches its own share (pages land near the thread that reads them).
#pragma omp parallel num_threads(threads)
  std::memset(buf.get() + share * omp_get_thread_num(), omp_get_thread_num() + 1, share);

  return best_read_gbs({{buf.get(), share}}, threads, clock);
}

double measure_read_bandwidth_gbs_of(const std::vector<std::pair<const void*, size_t>>& spans, int threads) {
  threads = std::max(threads, 1);
  constexpr uintptr_t page = 4096;  // the reads want 64-byte alignment; whole pages per thread
  std::vector<std::pair<const char*, size_t>> parts;  // each span's page-aligned middle, one share per thread
  for (const auto& [p, n] : spans) {
    const auto lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const auto hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    const size_t share = hi > lo ? (hi - lo) / threads / page * page : 0;
    if (share == 0) continue;
    parts.emplace_back(reinterpret_cast<const char*>(lo), share);
  }
  return best_read_gbs(parts, threads, timing::wall);
}

double measure_fma_gflops(int threads, bool bf16, timing clock) {
  threads = std::max(threads, 1);
  if (threads > 1) clock = timing::wall;
  if (bf16 && !has_avx512_bf16()) return 0;
  // flops per instruction: lanes x 2 (multiply + add); vdpbf16ps does 2 products per fp32 lane.
  double flops_per_op;
  float (*body)(int64_t);
  if (bf16) {
    body = dpbf16_avx512, flops_per_op = 16 * 4;
  } else if (has_avx512()) {
    body = fma_avx512, flops_per_op = 16 * 2;
  } else if (has_avx2()) {
    body = fma_avx2, flops_per_op = 8 * 2;
  } else {
    body = fma_generic, flops_per_op = 4 * 2;
  }
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double t0 = now_seconds(clock);
    float acc = 0;
#pragma omp parallel num_threads(threads) reduction(+ : acc)
    acc += body(fma_iters);
    const double s = now_seconds(clock) - t0;
    sink = sink + acc;
    best = std::max(best, threads * static_cast<double>(fma_iters) * 16 * flops_per_op / s / 1e9);
  }
  return best;
}

namespace {

__attribute__((target("amx-tile,amx-bf16"))) void amx_bf16_chains(int64_t iters) {
  alignas(64) static const uint16_t zeros[512] = {};  // the sums stay finite; the rate is the same
  kernels::cpu::configure_amx_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, zeros, 64);
  _tile_loadd(5, zeros, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  alignas(64) float out[256];
  _tile_stored(0, out, 64);  // (no tilerelease: the matmul kernels on this thread keep their config)
  asm volatile("" : : "r"(out) : "memory");
}

}  // namespace

double measure_amx_bf16_gflops(int threads) {
  if (!kernels::cpu::amx_usable()) return 0;
  threads = std::max(threads, 1);
  constexpr int64_t iters = 2000000;
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double t0 = now_seconds(timing::wall);
#pragma omp parallel num_threads(threads)
    amx_bf16_chains(iters);
    const double s = now_seconds(timing::wall) - t0;
    best = std::max(best, threads * static_cast<double>(iters) * 4 * 16384 / s / 1e9);
  }
  return best;
}

}  // namespace troupe::bench
