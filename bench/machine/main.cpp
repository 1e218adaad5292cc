// troupe-bench-machine: prints this machine's read bandwidth and FMA peaks, on 1 thread and on all.
#include <omp.h>

#include <cstdio>
#include <initializer_list>

#include "bench/machine/machine_limits.hpp"

int main() {
  using namespace troupe::bench;
  const int all = omp_get_num_procs();
  std::printf("isa %s, %d cores\n", machine_isa(), all);
  std::printf("%-8s %14s %16s %18s %18s\n", "threads", "read GB/s", "fp32 FMA GFLOP/s", "bf16 dot GFLOP/s",
              "AMX bf16 GFLOP/s");
  for (int t : {1, all}) {
    if (t == 1 && all == 1) continue;
    std::printf("%-8d %14.1f %16.1f %18.1f %18.1f\n", t, measure_read_bandwidth_gbs(t), measure_fma_gflops(t, false),
                measure_fma_gflops(t, true), measure_amx_bf16_gflops(t));
    if (all == 1) break;
  }
  return 0;
}
