# Sourced by tools/gpu-run-prebuilt.sh and tools/gpu-profile.sh on a GPU machine, from the repo
# root: where the binaries tools/gpu-carry.sh put in .gpu-carry/ find their libraries, the CUDA
# tools, the golden data and the tokenizer (unpacked from .gpu-carry/ when models/ stayed behind).
R=$PWD
C=$R/.gpu-carry
OUT=${OUT:-$C/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$PATH:/usr/local/cuda/bin
export TROUPE_TEST_DATA_DIR="$R/tests/data"
export TROUPE_TOKENIZER_DIR="$R/models/qwen3-tokenizer"
[ -f "$TROUPE_TOKENIZER_DIR/tokenizer.json" ] || tar -xJf "$C/qwen3-tokenizer.tar.xz" -C "$R"
export TROUPE_BENCH_MODEL_DIR=/tmp/troupe-cudafwd-qwen3-0.6b
