#!/usr/bin/env bash
# Fuzzes what a checkpoint directory feeds the loader (tests/fuzz/checkpoint_fuzzer.cpp:
# safetensors files, config.json, generation_config.json) with libFuzzer for SECONDS (default
# 120): every input must load or be refused with a troupe::error, without a crash, a sanitizer
# report or a hang. Needs clang.
#   ./tools/fuzz-checkpoint.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/checkpoint-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/checkpoint_fuzzer.cpp \
  runtime/model/safetensors_reader.cpp runtime/model/config.cpp runtime/core/mapped_file.cpp \
  runtime/core/dtype.cpp runtime/core/error.cpp \
  -o "$out/checkpoint_fuzzer"
# Seeds: the golden tiny-dense set's config files, and a small safetensors file of each float
# dtype (the first byte picks the parser: 0 safetensors, 1 config.json, 2 generation_config.json).
{ printf '\x01'; cat tests/data/golden/tiny-dense/config.json; } > "$out/checkpoint-corpus/config"
{ printf '\x02'; cat tests/data/golden/tiny-dense/generation_config.json; } > "$out/checkpoint-corpus/generation"
/usr/bin/python3 - "$out/checkpoint-corpus" <<'PY'
import json, struct, sys
header = {"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
          "c": {"dtype": "F16", "shape": [2, 2], "data_offsets": [32, 40]},
          "d": {"dtype": "I8", "shape": [3], "data_offsets": [40, 43]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
body = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, 7) + bytes(range(16)) + b"\x01\x02\x03"
open(sys.argv[1] + "/safetensors", "wb").write(b"\x00" + struct.pack("<Q", len(h)) + h + body)
PY
"$out/checkpoint_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=4096 -rss_limit_mb=2048 -timeout=10 "$out/checkpoint-corpus"
