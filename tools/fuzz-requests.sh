#!/usr/bin/env bash
# Fuzzes the server's request decoder (tests/fuzz/request_fuzzer.cpp) with libFuzzer for
# SECONDS (default 120): every input must decode to a request or a wire error, without a crash,
# a sanitizer report or a failed encode -> decode round trip. Needs clang (Debian's clang-14).
#   ./tools/fuzz-requests.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/request_fuzzer.cpp \
  runtime/wire/request_codec.cpp runtime/wire/json_msgpack.cpp runtime/wire/utf8.cpp runtime/wire/protocol.cpp \
  runtime/core/json_in_order.cpp \
  -o "$out/request_fuzzer"
# Seeds: valid requests of each kind, tools and tool calls included (python3-msgpack).
/usr/bin/python3 - "$out/corpus" <<'PY' || echo "no python3-msgpack: starting from an empty corpus"
import sys, msgpack
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 7.5}}, "required": ["city"]}}}]
reqs = [
    {"v": 1, "type": "generate", "id": "a", "tools": tools, "enable_thinking": False, "max_tokens": 3,
     "messages": [{"role": "user", "content": "hi"},
                  {"role": "assistant", "content": None, "tool_calls": [{"name": "f", "arguments": {"x": [1, {"y": None}]}}]},
                  {"role": "tool", "content": "ok"}]},
    {"v": 1, "type": "generate", "id": "b", "prompt_ids": [1, 2, 3], "temperature": 0.5, "stop": ["x"], "stop_ids": [4]},
    {"v": 1, "type": "generate", "id": "c", "prompt": "hello", "top_p": 0.9, "seed": 7, "deadline_ms": 10, "priority": -3, "n": 4},
    {"v": 1, "type": "tokenize", "messages": [{"role": "user", "content": "x"}], "tools": tools},
    {"v": 1, "type": "set_policy", "policy": "fcfs", "config": "a=1", "token": "x"},
    {"v": 1, "type": "cancel", "id": "a"},
    {"v": 1, "type": "generate", "id": "d", "prompt": "x", "response_format": {"type": "json_schema",
     "json_schema": {"name": "n", "strict": True, "schema": {"type": "object", "properties": {"a": {"enum": [1, 2.5]}}}}}},
    {"v": 1, "type": "generate", "id": "e", "prompt": "x", "structured_outputs": {"json": " {\"type\": [\"string\", \"null\"]} "}},
    {"v": 1, "type": "generate", "id": "f", "prompt": "x", "structured_outputs": {"choice": ["yes", "no"]}},
    {"v": 1, "type": "generate", "id": "g", "prompt": "x", "structured_outputs": {"regex": "[a-z]+"}},
]
for i, r in enumerate(reqs):
    open(f"{sys.argv[1]}/seed{i}", "wb").write(msgpack.packb(r, use_bin_type=True))
PY
"$out/request_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=4096 -rss_limit_mb=2048 "$out/corpus"
