#!/usr/bin/env bash
# Fuzzes what the server reads out of model output (tests/fuzz/model_output_fuzzer.cpp: the
# tool-call parser, the reasoning split) with libFuzzer for SECONDS (default 120): any text must
# parse without a crash or a sanitizer report, and the reasoning split must not depend on how the
# text is streamed to it. Needs clang.
#   ./tools/fuzz-model-output.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/model-output-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/model_output_fuzzer.cpp \
  runtime/serve/tool_calls.cpp runtime/serve/reasoning_split.cpp \
  runtime/tokenizer/*.cpp runtime/tokenizer/jinja/*.cpp runtime/core/error.cpp runtime/core/mapped_file.cpp \
  runtime/core/json_in_order.cpp runtime/core/dtype.cpp \
  $(pkg-config --cflags --libs libpcre2-8 libutf8proc) -o "$out/model_output_fuzzer"
# Seeds (the first byte: bit 0 the prompt opened <think>, the rest the streaming piece size).
printf '\x06<think>\nplan: call it\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
  > "$out/model-output-corpus/tool"
printf '\x03thinking on\n</think>\n\nThe answer.' > "$out/model-output-corpus/opened"
printf '\x00<think>\n\n</think>\n\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b"' \
  > "$out/model-output-corpus/open-call"
"$out/model_output_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=4096 -rss_limit_mb=2048 -timeout=10 "$out/model-output-corpus"
