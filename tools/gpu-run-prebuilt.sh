#!/usr/bin/env bash
# Runs the binaries tools/gpu-carry.sh put in .gpu-carry/ on a GPU machine: the FP8 GEMM test and
# bench, then the CUDA forward step's test (golden sets, CPU engine, FP8) and bench, then serving on
# the device: its test (scheduler + executor over the CUDA backend) and the serving bench. Logs go
# to "$OUT" (default .gpu-carry/out): gemm-test.log, gemm-bench.txt, fwd-test.log,
# fwd-memcheck.log, fwd-bench.txt, serve-test.log, serving-bench.txt, and
# fwd-test-sync.log only when the forward test failed (a rerun with TROUPE_CUDA_SYNC_CHECK=1, which
# synchronizes after every kernel so a fault names its kernel). Exit 1 when a check failed.
set -u
cd "$(dirname "$0")/.."
. tools/gpu-env.sh
status=0
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader || { echo "no GPU"; exit 2; }
run() {  # name timeout log binary args...
  local name=$1 t=$2 log=$3; shift 3
  echo "=== $name"
  timeout "$t" "$@" > "$OUT/$log" 2>&1
  local rc=$?
  echo "$name: exit $rc"
  [ "$rc" -eq 0 ] || status=1
  return $rc
}
test_args=(--log_level=message --report_level=detailed --color_output=no)
if [ -z "${SKIP_GEMM:-}" ]; then  # SKIP_GEMM=1: the forward step only (saves a lease's minutes)
  run "gemm test" 150 gemm-test.log "$C/kernels_cuda_gemm_fp8_test" "${test_args[@]}"; tail -3 "$OUT/gemm-test.log"
  run "gemm bench" 150 gemm-bench.txt "$C/troupe-bench-cuda-gemm"; cat "$OUT/gemm-bench.txt"
fi
if ! run "forward test" 200 fwd-test.log "$C/troupe_engine_cuda_test" "${test_args[@]}"; then
  grep -E "error|fail" "$OUT/fwd-test.log" | head -40
  TROUPE_CUDA_SYNC_CHECK=1 timeout 90 "$C/troupe_engine_cuda_test" --log_level=message --color_output=no \
    > "$OUT/fwd-test-sync.log" 2>&1
fi
grep -E "worst|fp8|agreement" "$OUT/fwd-test.log" | head -40; tail -3 "$OUT/fwd-test.log"
if command -v compute-sanitizer >/dev/null; then  # out-of-bounds and uninitialised reads a pass can hide
  run "forward test under compute-sanitizer memcheck (tiny-dense cases)" 120 fwd-memcheck.log compute-sanitizer \
    --tool memcheck --error-exitcode 3 "$C/troupe_engine_cuda_test" --color_output=no \
    --run_test='prompt_logits_match_reference/_0:mixed_batch_equals_each_alone/_0:fp8_weights_match_cpu_engine/_0:hidden_states_match_cpu_engine/_0:kv_blocks_read_and_write_in_the_cpu_pools_layout'
  grep -E "ERROR SUMMARY|Invalid|uninitial" "$OUT/fwd-memcheck.log" | head -8
fi
run "forward bench" 150 fwd-bench.txt "$C/troupe-bench-cuda-forward"; cat "$OUT/fwd-bench.txt"
run "serve test" 150 serve-test.log "$C/troupe_serve_cuda_test" "${test_args[@]}"; grep -E "error|fail" "$OUT/serve-test.log" | head -20; tail -3 "$OUT/serve-test.log"
# Serving on the device: the forward bench's Qwen3-0.6B-shaped checkpoint behind an in-process troupe
# serve --device cuda (1 vs 16 streams, and the runtime's overhead per step).
if [ -d "$TROUPE_BENCH_MODEL_DIR" ]; then
  run "serving bench (cuda)" 200 serving-bench.txt "$C/serving_bench" --model "$TROUPE_BENCH_MODEL_DIR" --device cuda \
    --scenarios scaling,overhead --quick
  cat "$OUT/serving-bench.txt"
fi
echo "=== $([ $status -eq 0 ] && echo ALL PASSED || echo FAILURES)"
exit $status
