#!/usr/bin/env bash
# Fuzzes the chat template's Jinja engine on template text (tests/fuzz/chat_template_fuzzer.cpp)
# with libFuzzer for SECONDS (default 120): every template must compile and render a
# conversation, or be refused with a troupe::error, without a crash, a sanitizer report, a hang or
# runaway memory. Needs clang.
#   ./tools/fuzz-chat-template.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/chat-template-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/chat_template_fuzzer.cpp \
  runtime/tokenizer/*.cpp runtime/tokenizer/jinja/*.cpp runtime/core/error.cpp runtime/core/mapped_file.cpp \
  runtime/core/json_in_order.cpp runtime/core/dtype.cpp \
  $(pkg-config --cflags --libs libpcre2-8 libutf8proc) -o "$out/chat_template_fuzzer"
# Seed: Qwen3's own template.
/usr/bin/python3 -c "import json, sys; open(sys.argv[2], 'w').write(json.load(open(sys.argv[1]))['chat_template'])" \
  models/qwen3-tokenizer/tokenizer_config.json "$out/chat-template-corpus/qwen3"
"$out/chat_template_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=8192 -rss_limit_mb=2048 -timeout=10 "$out/chat-template-corpus"
