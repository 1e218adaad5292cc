#!/usr/bin/env bash
# Fuzzes the tokenizer.json reader (tests/fuzz/tokenizer_json_fuzzer.cpp) with libFuzzer for
# SECONDS (default 120): every file must load or be refused with a troupe::error, and what loads
# must tokenize a fixed text, without a crash, a sanitizer report or a hang. Needs clang.
#   ./tools/fuzz-tokenizer-json.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/tokenizer-json-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/tokenizer_json_fuzzer.cpp \
  runtime/tokenizer/*.cpp runtime/tokenizer/jinja/*.cpp runtime/core/error.cpp runtime/core/mapped_file.cpp \
  runtime/core/json_in_order.cpp runtime/core/dtype.cpp \
  $(pkg-config --cflags --libs libpcre2-8 libutf8proc) -o "$out/tokenizer_json_fuzzer"
# Seed: the Qwen3 tokenizer.json cut down to its 256 byte tokens, two merges and one added token
# (in both merge formats).
/usr/bin/python3 - "$out/tokenizer-json-corpus" <<'PY'
import json, sys
j = json.load(open("models/qwen3-tokenizer/tokenizer.json", encoding="utf-8"))
vocab = {t: i for t, i in j["model"]["vocab"].items() if i < 256}
vocab["ab"] = 256
vocab["\u0120ab"] = 257
j["model"]["vocab"] = vocab
j["added_tokens"] = [{"id": 258, "content": "<|end|>", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}]
for name, merges in (("new", [["a", "b"], ["\u0120", "ab"]]), ("old", ["a b", "\u0120 ab"])):
    j["model"]["merges"] = merges
    open(f"{sys.argv[1]}/{name}", "w", encoding="utf-8").write(json.dumps(j, ensure_ascii=False))
PY
"$out/tokenizer_json_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=16384 -rss_limit_mb=2048 -timeout=10 "$out/tokenizer-json-corpus"
