#!/usr/bin/env bash
# Builds and runs the CUDA FP8 block GEMM checks on a GPU machine, in one go (docs/cuda.md):
# nvidia-smi, the correctness test (kernels_cuda_gemm_fp8_test, verbose, then through ctest) and
# the benchmark (troupe-bench-cuda-gemm). Uses the standalone project tests/kernels/cuda/standalone,
# which needs only a C++20 compiler, CMake >= 3.18, the CUDA toolkit, OpenMP and (for the test)
# Boost.Test: not the main build's CAF / hiredis / msgpack. Builds into build-gpu/ with -j16.
# Without Boost.Test the test is not built; a prebuilt one carried in .gpu-carry/ (the binary
# kernels_cuda_gemm_fp8_test plus libboost_unit_test_framework.so.1.74.0, built as docs/cuda.md
# says) then runs instead, with LD_LIBRARY_PATH=.gpu-carry:/usr/local/cuda/lib64.
# Every output is written to build-gpu/gpu-check/; five of them (gpu-check.log, which holds
# everything printed, test.log, bench.txt, configure.log, build.log) are copied to "$OUT" when OUT
# is set (the device tool brings back at most 8 files). EXTRA_CMAKE_ARGS: more configure options.
# Exit: 0 all passed; 1 a check failed; 2 the machine lacks something (said why). About 2-4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-gpu
LOGS=$BUILD/gpu-check
CARRY=$ROOT/.gpu-carry
JOBS=${JOBS:-16}
ARCHS=${TROUPE_CUDA_ARCHS:-90}
mkdir -p "$LOGS"
exec > >(tee "$LOGS/gpu-check.log") 2>&1

copy_out() {
  sleep 1  # let tee flush gpu-check.log
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" || return
    for f in gpu-check.log test.log bench.txt configure.log build.log; do
      [ -f "$LOGS/$f" ] && cp "$LOGS/$f" "$OUT/"
    done
    echo "gpu-check: outputs copied to $OUT"
  fi
}
trap copy_out EXIT
die() { echo "gpu-check: FATAL: $*"; exit 2; }
step() { echo; echo "=== $* ($(date +%T))"; }
START=$SECONDS

step "tools"
export PATH="$PATH:/usr/local/cuda/bin"
NVCC=$(command -v nvcc) || die "nvcc not found on PATH or in /usr/local/cuda/bin: install the CUDA toolkit (12.4+)"
"$NVCC" --version | tail -2
# Missing Debian packages: try apt-get once (the machine may have no network), then say exactly what is missing.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
if [ ! -e /usr/include/boost/test/unit_test.hpp ] && ! ls /usr/lib/*/cmake/boost_unit_test_framework-* >/dev/null 2>&1 \
   && ! ls /usr/local/lib/cmake/boost_unit_test_framework-* >/dev/null 2>&1; then
  if [ -x "$CARRY/kernels_cuda_gemm_fp8_test" ]; then
    echo "gpu-check: no Boost.Test here; the prebuilt test in .gpu-carry/ will run instead"
  else
    missing+=(libboost-test-dev)
  fi
fi
if ((${#missing[@]})); then
  echo "gpu-check: missing: ${missing[*]}; trying apt-get (60 s at most)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  if command -v apt-get >/dev/null && timeout 60 $SUDO apt-get update -qq >/dev/null 2>&1 &&
     DEBIAN_FRONTEND=noninteractive timeout 120 $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    echo "gpu-check: installed ${missing[*]}"
  else
    echo "gpu-check: could not install ${missing[*]} (no network or no apt-get)"
  fi
fi
command -v cmake >/dev/null || die "cmake is missing and could not be installed (apt-get install cmake, or pip install cmake)"
command -v g++ >/dev/null || die "g++ is missing and could not be installed (apt-get install g++)"
cmake --version | head -1
g++ --version | head -1

step "nvidia-smi"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
timeout 30 nvidia-smi 2>&1 | tee "$LOGS/nvidia-smi.txt" || die "nvidia-smi failed: no usable GPU/driver"

step "configure build-gpu (CUDA archs $ARCHS)"
timeout 120 cmake -S tests/kernels/cuda/standalone -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$NVCC" -DTROUPE_CUDA_ARCHS="$ARCHS" ${EXTRA_CMAKE_ARGS:-} > "$LOGS/configure.log" 2>&1 \
  || { tail -40 "$LOGS/configure.log"; die "cmake configure failed (full log: build-gpu/gpu-check/configure.log)"; }
grep -E "Boost|WARNING|CUDA" "$LOGS/configure.log" | head -10
targets=(troupe-bench-cuda-gemm)
if grep -q "Boost.Test not found" "$LOGS/configure.log"; then
  echo "gpu-check: WARNING: Boost.Test missing, the test is not built; the benchmark's checks still run"
  status_no_test=1
else
  targets+=(kernels_cuda_gemm_fp8_test)
fi

step "build ${targets[*]} (-j$JOBS)"
timeout 300 cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" > "$LOGS/build.log" 2>&1 \
  || { grep -E "error|Error" "$LOGS/build.log" | head -30; die "build failed (full log: build-gpu/gpu-check/build.log)"; }
echo "built in $((SECONDS - START)) s since start"

status=${status_no_test:-0}
TEST_BIN=""
if [[ " ${targets[*]} " == *" kernels_cuda_gemm_fp8_test "* ]]; then
  TEST_BIN=$BUILD/tests/kernels_cuda_gemm_fp8_test
elif [ -x "$CARRY/kernels_cuda_gemm_fp8_test" ]; then
  TEST_BIN=$CARRY/kernels_cuda_gemm_fp8_test
  echo "gpu-check: running the PREBUILT test .gpu-carry/kernels_cuda_gemm_fp8_test (built elsewhere from this"
  echo "gpu-check: checkout; see docs/cuda.md) with LD_LIBRARY_PATH=.gpu-carry:/usr/local/cuda/lib64"
  status=0
else
  echo "gpu-check: no test binary (no Boost.Test and nothing in .gpu-carry/): only the benchmark's checks run"
fi
if [ -n "$TEST_BIN" ]; then
  step "test (verbose): $TEST_BIN"
  if [ "$TEST_BIN" = "$CARRY/kernels_cuda_gemm_fp8_test" ]; then
    LD_LIBRARY_PATH="$CARRY:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 240 "$TEST_BIN" \
      --log_level=message --report_level=detailed --color_output=no 2>&1 | tee "$LOGS/test.log"
  else
    timeout 240 "$TEST_BIN" --log_level=message --report_level=detailed --color_output=no 2>&1 | tee "$LOGS/test.log"
  fi
  rc=${PIPESTATUS[0]}
  case $rc in
    0) echo "gpu-check: test PASSED" ;;
    77) echo "gpu-check: test SKIPPED (exit 77): the test saw no sm_89+ device"; status=1 ;;
    124) echo "gpu-check: test TIMED OUT"; status=1 ;;
    *) echo "gpu-check: test FAILED (exit $rc)"; status=1 ;;
  esac
  if [ "$TEST_BIN" = "$BUILD/tests/kernels_cuda_gemm_fp8_test" ]; then
    step "ctest -L cuda (each case in its own process)"
    (cd "$BUILD" && timeout 240 ctest -L cuda --output-on-failure -j4) 2>&1 | tee "$LOGS/ctest.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    grep -q "(Skipped)" "$LOGS/ctest.log" && { echo "gpu-check: ctest skipped cases on a GPU machine"; status=1; }
  fi
fi

step "benchmark"
timeout 300 "$BUILD/bench/troupe-bench-cuda-gemm" 2>&1 | tee "$LOGS/bench.txt"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "gpu-check: benchmark exit $rc (1: a correctness check failed)"; status=1; }

step "done in $((SECONDS - START)) s: $([ $status -eq 0 ] && echo ALL PASSED || echo FAILURES, see above)"
exit $status
