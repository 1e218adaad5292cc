#!/usr/bin/env bash
# llama.cpp on this machine, on Troupe's benchmark model: the peer that issues #2 and #7 quote
# ("llama.cpp decodes this shape at about 23 tokens/s ... Q8_0 at about 36"). Quoted figures come
# from another machine of the kind; this measures them here, so they can be put beside Troupe's in
# one run (tools/bench.sh peers).
#
#   bench/peers/llama_cpp.sh MODEL_DIR [WORK_DIR]
#
# Fetches llama.cpp's source from PyPI (the llama-cpp-python sdist vendors it; nothing else here is
# reachable), builds llama-bench and llama-quantize natively (-DGGML_NATIVE=ON, Release, as its
# README says), writes MODEL_DIR as a BF16 GGUF with bench/peers/hf_to_gguf.py (llama.cpp's own
# converter needs torch), quantizes a Q8_0 copy, and runs llama-bench with all cores: prompt
# processing of 512 tokens and 32 generated tokens, for BF16 and Q8_0, mmap on and off.
# The build takes ~15 minutes on 2 cores; WORK_DIR (default /tmp/troupe-llama-cpp) keeps it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="${1:?usage: bench/peers/llama_cpp.sh MODEL_DIR [WORK_DIR]}"
work="${2:-/tmp/troupe-llama-cpp}"
version=0.3.36   # llama-cpp-python; its vendor/llama.cpp is the llama.cpp that is measured
mkdir -p "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -d "$src" ]; then
  (cd "$work" && python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" >/dev/null &&
     tar xzf "llama_cpp_python-$version.tar.gz")
fi
if [ ! -x "$src/build/bin/llama-bench" ] || [ ! -x "$src/build/bin/llama-quantize" ]; then
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >/dev/null
  cmake --build "$src/build" -j"$(nproc)" --target llama-bench llama-quantize >/dev/null
fi
name="$(basename "$model")"
bf16="$work/$name-bf16.gguf"
q8="$work/$name-q8_0.gguf"
# The converter (and llama.cpp's gguf-py it imports) needs numpy, which a fresh machine may lack.
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install --quiet numpy >/dev/null
[ -f "$bf16" ] || PYTHONPATH="$src/gguf-py" python3 "$here/hf_to_gguf.py" "$model" "$bf16"
[ -f "$q8" ] || "$src/build/bin/llama-quantize" "$bf16" "$q8" Q8_0 >/dev/null 2>&1
threads="$(nproc)"
echo "llama.cpp $(cd "$src" && git describe --always 2>/dev/null || echo "from llama-cpp-python $version"), $threads threads"
for m in "$bf16" "$q8"; do
  "$src/build/bin/llama-bench" -m "$m" -t "$threads" -p 512 -n 32 -r 3 -lm mmap,none -o md
done
