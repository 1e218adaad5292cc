// What this machine can do at best: sustained read bandwidth from DRAM and peak vector FMA
// throughput. Kernel benchmarks report their speed as a fraction of these, measured in the same run.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace troupe::bench {

// How a measurement is timed. `wall`: elapsed time (what a caller waits). `thread_cpu`: the calling
// thread's CPU time: on a machine shared with other processes it leaves out the time the thread was
// not running, so ratios stay meaningful under load. Single-threaded only (threads > 1: wall).
enum class timing { wall, thread_cpu };

// Seconds on `clock` (a monotonic origin; differences only).
double now_seconds(timing clock);

// Instruction set the measurements below use: "avx512", "avx2" or "generic" (the best the CPU has).
const char* machine_isa() noexcept;

// Sustained read bandwidth in GB/s (1e9 bytes/s) of `threads` threads each streaming its share of a
// buffer several times larger than the last-level cache (vector loads, 8 accumulators); best of
// several passes. `huge_pages`: the buffer asks for 2 MB pages (madvise), as the best case. NOTE: on
// the dev VM 4 KB pages read ~25% slower (12-13 vs 16-17 GB/s on one core), and so do weights mapped
// from a page cache filled with 4 KB folios; with large folios (a file read back after eviction)
// the mapped weights read as fast as 2 MB pages. The ceiling is the higher figure.
double measure_read_bandwidth_gbs(int threads, timing clock = timing::wall, bool huge_pages = true);

// The same reads over memory that already holds data (a checkpoint's mapped files, `spans` of
// [start, bytes)), best of several passes, in GB/s. On the dev VM memory held a while read ~20%
// slower than the fresh buffer above (docs/engine.md, "Weights in the page cache"): what the
// weights' own memory gives decode, beside the ceiling the fresh buffer gives.
double measure_read_bandwidth_gbs_of(const std::vector<std::pair<const void*, size_t>>& spans, int threads);

// Peak GFLOP/s of `threads` threads each running independent register-only FMA chains:
// fp32 FMA (vfmadd, 2 flops per lane) when bf16 is false; the AVX512_BF16 dot product
// (vdpbf16ps, 2 products + 2 adds per fp32 lane) when bf16 is true. Returns 0 when the CPU lacks
// the instruction (bf16 without AVX512_BF16).
double measure_fma_gflops(int threads, bool bf16, timing clock = timing::wall);

// Peak GFLOP/s of `threads` threads each running TDPBF16PS (Intel AMX: a 16 x 32 bf16 tile times a
// 32 x 16 one into 16 x 16 fp32, 16384 flops) on four independent accumulator tiles: the ceiling
// of the bf16 compute mode where it runs on AMX. 0 where kernels::cpu::amx_usable() is false.
double measure_amx_bf16_gflops(int threads);

}  // namespace troupe::bench
