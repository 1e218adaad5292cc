#!/usr/bin/env bash
# Prepares .gpu-carry/ (git-ignored) for a GPU machine that lacks this repo's Debian packages: builds
# the CUDA test and bench binaries here (build dir $TROUPE_BUILD_DIR, default build-cuda) and copies
# them with the Boost.Test library they link. On the GPU machine, from the repo root:
#   bash tools/gpu-run-prebuilt.sh        (needs only the NVIDIA driver and the CUDA 13 runtime)
# docs/cuda.md, "Running it on a GPU machine".
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TROUPE_BUILD_DIR:-build-cuda}
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTROUPE_WITH_CUDA=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target kernels_cuda_gemm_fp8_test troupe-bench-cuda-gemm \
  troupe_engine_cuda_test troupe-bench-cuda-forward troupe_serve_cuda_test serving_bench
mkdir -p .gpu-carry
grep -qx '/.gpu-carry/' "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null ||
  { mkdir -p "$(git rev-parse --git-dir)/info"; echo '/.gpu-carry/' >> "$(git rev-parse --git-dir)/info/exclude"; }
# Stripped: the debug information is 90% of each binary (27 MB -> 2 MB); the kernels' fatbin stays.
for b in tests/kernels/cuda/kernels_cuda_gemm_fp8_test bench/cuda/troupe-bench-cuda-gemm \
         tests/runtime/engine/cuda/troupe_engine_cuda_test bench/cuda/troupe-bench-cuda-forward \
         tests/runtime/serve/cuda/troupe_serve_cuda_test bench/serving/serving_bench; do
  strip -o ".gpu-carry/$(basename "$b")" "$build/$b"
done
# The repo's files are over the device tool's 64 MiB: the tokenizer (11 MB, needed by the forward
# bench) also travels as xz (2 MB) so models/ can stay behind; gpu-run-prebuilt.sh unpacks it.
tar -cJf .gpu-carry/qwen3-tokenizer.tar.xz models/qwen3-tokenizer
boost=$(ldd .gpu-carry/kernels_cuda_gemm_fp8_test | awk '/libboost_unit_test_framework/ {print $3}')
[ -n "$boost" ] && cp "$boost" .gpu-carry/
# serving_bench runs troupe serve in-process: CAF, hiredis, toml++, PCRE2 and utf8proc travel too
# (under the names the binary asks for; gpu-env.sh puts .gpu-carry/ on LD_LIBRARY_PATH).
for lib in $(ldd .gpu-carry/serving_bench | awk '/libcaf_|libhiredis|libtomlplusplus|libpcre2|libutf8proc/ {print $3}'); do
  cp -L "$lib" .gpu-carry/
done
ls -la .gpu-carry
