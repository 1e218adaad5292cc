#!/usr/bin/env bash
# Fuzzes the Qwen3 tokenizer on request text (tests/fuzz/tokenizer_fuzzer.cpp) with libFuzzer for
# SECONDS (default 120): text that is not UTF-8 must be refused; any other must round-trip to its
# NFC form through encode and decode, streamed or not, without a crash or a sanitizer report.
# Needs clang.
#   ./tools/fuzz-tokenizer.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/tokenizer-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/tokenizer_fuzzer.cpp \
  runtime/tokenizer/*.cpp runtime/tokenizer/jinja/*.cpp runtime/core/error.cpp runtime/core/mapped_file.cpp \
  runtime/core/json_in_order.cpp runtime/core/dtype.cpp \
  $(pkg-config --cflags --libs libpcre2-8 libutf8proc) -o "$out/tokenizer_fuzzer"
# Seeds: the tokenizer tests' reference texts (tests/data/tokenizer), one file each.
/usr/bin/python3 - "$out/tokenizer-corpus" <<'PY'
import json, pathlib, sys
for n, line in enumerate(open("tests/data/tokenizer/qwen3_tokenizer_cases.jsonl", encoding="utf-8")):
    pathlib.Path(sys.argv[1], f"seed{n}").write_bytes(json.loads(line)["text"].encode()[:4096])
PY
"$out/tokenizer_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=4096 -rss_limit_mb=4096 -timeout=10 "$out/tokenizer-corpus"
