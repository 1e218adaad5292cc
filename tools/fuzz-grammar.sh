#!/usr/bin/env bash
# Fuzzes structured output's parsers (tests/fuzz/grammar_fuzzer.cpp: GBNF, regexes, JSON
# schemas) with libFuzzer for SECONDS (default 120): every spec must compile or be refused with a
# troupe::error, without a crash, a sanitizer report, a hang or runaway memory. Needs clang.
#   ./tools/fuzz-grammar.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
mkdir -p "$out/grammar-corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. tests/fuzz/grammar_fuzzer.cpp \
  $(ls runtime/grammar/*.cpp | grep -v token_table_from_tokenizer) runtime/core/error.cpp \
  -o "$out/grammar_fuzzer"
# Seeds: one spec of each kind (the first byte picks GBNF, regex or JSON schema).
printf '\x00root ::= "{" ( [a-z]+ ":" [0-9]{1,3} ) ("," [a-z]+)* "}" | [^"\\\\]{2,4}\n' > "$out/grammar-corpus/gbnf"
printf '\x01^(ab|c[d-f]+)?[0-9]{2,}\\.\\w*$' > "$out/grammar-corpus/regex"
printf '\x02{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":300},"b":{"anyOf":[{"type":"string","pattern":"^x+$"},{"$ref":"#/$defs/n"}]}},"required":["a"],"$defs":{"n":{"type":"array","items":{"enum":[1,"z",null]},"maxItems":3}}}' \
  > "$out/grammar-corpus/schema"
"$out/grammar_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len=2048 -rss_limit_mb=2048 -timeout=10 "$out/grammar-corpus"
