#!/usr/bin/env bash
# The libFuzzer harnesses (tests/fuzz/TARGET_fuzzer.cpp), each on an input Troupe reads from
# clients, checkpoints or model output. Outside ctest: each runs for SECONDS (default 120), from
# seeds written here into build-fuzz/TARGET-corpus; a failing input lands in build-fuzz/. Needs
# clang (Debian's clang-14 or later).
#   ./tools/fuzz.sh TARGET [SECONDS]
# TARGET, and what must hold for every input (else a crash, a sanitizer report, a hang or abort):
#   request        the server's request decoder: a request or a wire error; a request round-trips
#   grammar        structured output's GBNF / regex / JSON-schema parsers: compile or troupe::error
#   tokenizer      request text: refused if not UTF-8, else decode(encode) is its NFC form, streamed too
#   tokenizer_json a checkpoint's tokenizer.json: loads and tokenizes, or troupe::error
#   checkpoint     safetensors files, config.json, generation_config.json: load or troupe::error
#   chat_template  a checkpoint's Jinja chat template: renders a conversation or troupe::error
#   model_output   tool calls parse; streamed calls and the reasoning split do not depend on how text is streamed
#   openai         the OpenAI-compatible API: HTTP/1.1 requests cut anywhere, and request bodies
#                  (chat, completions, responses, Anthropic's messages): a request or an error; the response to an
#                  accepted one is valid JSON / SSE;
#                  /tokenize and /detokenize bodies alike
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"
secs="${2:-120}"
out="${TROUPE_FUZZ_DIR:-build-fuzz}"
tokenizer_sources="runtime/tokenizer/*.cpp runtime/tokenizer/jinja/*.cpp runtime/core/error.cpp
  runtime/core/mapped_file.cpp runtime/core/json_in_order.cpp runtime/core/dtype.cpp"
tokenizer_libs="$(pkg-config --cflags --libs libpcre2-8 libutf8proc 2>/dev/null || true)"

# Seeds, one function a target, each writing into the corpus folder $1.
# Valid requests of each kind, tools and tool calls included (python3-msgpack).
seed_request() {
/usr/bin/python3 - "$1" <<'PY' || echo "no python3-msgpack: starting from an empty corpus"
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
}

# One spec of each kind (the first byte picks GBNF, regex or JSON schema).
seed_grammar() {
printf '\x00root ::= "{" ( [a-z]+ ":" [0-9]{1,3} ) ("," [a-z]+)* "}" | [^"\\\\]{2,4}\n' > "$1/gbnf"
printf '\x01^(ab|c[d-f]+)?[0-9]{2,}\\.\\w*$' > "$1/regex"
printf '\x02{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":300},"b":{"anyOf":[{"type":"string","pattern":"^x+$"},{"$ref":"#/$defs/n"}]}},"required":["a"],"$defs":{"n":{"type":"array","items":{"enum":[1,"z",null]},"maxItems":3}}}' \
  > "$1/schema"
}

# The tokenizer tests' reference texts (tests/data/tokenizer), one file each.
seed_tokenizer() {
/usr/bin/python3 - "$1" <<'PY'
import json, pathlib, sys
for n, line in enumerate(open("tests/data/tokenizer/qwen3_tokenizer_cases.jsonl", encoding="utf-8")):
    pathlib.Path(sys.argv[1], f"seed{n}").write_bytes(json.loads(line)["text"].encode()[:4096])
PY
}

# The Qwen3 tokenizer.json cut down to its 256 byte tokens, two merges and one added token (in
# both merge formats).
seed_tokenizer_json() {
/usr/bin/python3 - "$1" <<'PY'
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
}

# The golden tiny-dense set's config files, a quantization_config of each kind, and a small
# safetensors file of each float dtype (the first byte picks the parser: 0 safetensors, 1
# config.json, 2 generation_config.json, 3 quantization_config).
seed_checkpoint() {
{ printf '\x01'; cat tests/data/golden/tiny-dense/config.json; } > "$1/config"
{ printf '\x02'; cat tests/data/golden/tiny-dense/generation_config.json; } > "$1/generation"
printf '\x03{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true}' > "$1/gptq"
printf '\x03{"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": true}' > "$1/awq"
printf '\x03{"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}' > "$1/fp8"
printf '\x03{"quant_method": "troupe_int8", "bits": 8, "symmetric": true, "group_size": 128, "scale_dtype": "float32", "activation_scheme": "dynamic"}' > "$1/int8"
/usr/bin/python3 - "$1" <<'PY'
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
}

# Qwen3's own template.
seed_chat_template() {
/usr/bin/python3 -c "import json, sys; open(sys.argv[2], 'w').write(json.load(open(sys.argv[1]))['chat_template'])" \
  models/qwen3-tokenizer/tokenizer_config.json "$1/qwen3"
}

# The first byte: bit 0 the prompt opened <think>, the rest the streaming piece size.
seed_model_output() {
printf '\x06<think>\nplan: call it\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
  > "$1/tool"
printf '\x03thinking on\n</think>\n\nThe answer.' > "$1/opened"
printf '\x00<think>\n\n</think>\n\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b"' \
  > "$1/open-call"
printf '\x00Checking.\n<tool_call>\n<function=f>\n<parameter=i>\n2\n</parameter>\n<parameter=n>\n1.5e3\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=o>\n{"k": [1]}\n</parameter>\n<parameter=s>\nnull\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n<parameter=a>\n[1' \
  > "$1/coder-call"
}

# Requests over HTTP, and bodies of both endpoints (the first byte picks which).
seed_openai() {
printf '\x00GET /v1/responses/resp_1/input_items?limit=5&order=asc&after=msg%%5F1 HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}' > "$1/http"
printf '\x01{"model": "lora-a", "messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": "hi", "name": "a"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "1", "tool_call_id": "c"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2, "n": 2, "stop": "x", "max_completion_tokens": 5, "chat_template_kwargs": {"enable_thinking": false}}' > "$1/chat"
printf '\x02{"model": "m", "prompt": [[1, 2, 3]], "max_tokens": 3, "logprobs": 1, "echo": false, "seed": 4, "guided_choice": ["a", "b"], "user": "t", "logit_bias": {"5": -100}}' > "$1/completion"
printf '\x02{"prompt": "scored", "echo": true, "logprobs": 2, "max_tokens": 0}' > "$1/echo"
printf '\x01{"messages": [{"role": "user", "content": "q"}], "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}}' > "$1/schema"
printf '\x03{"messages": [{"role": "user", "content": "q"}], "add_generation_prompt": true, "return_token_strs": true}' > "$1/tokenize"
printf '\x02{"prompt": [[1, 2], "text", [3]], "n": 2, "echo": true, "logprobs": 0, "max_tokens": 0}' > "$1/batch"
printf '\x01{"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "tool_choice": "required", "parallel_tool_calls": false, "stream": true}' > "$1/forced"
printf '\x01{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "{"}], "add_generation_prompt": false, "continue_final_message": true, "truncate_prompt_tokens": 8, "stop": ["}"], "include_stop_str_in_output": true}' > "$1/prefill"
printf '\x03{"model": "m", "tokens": [1, 2, 151643]}' > "$1/detokenize"
printf '\x04{"model": "m", "instructions": "Be brief.", "input": [{"role": "user", "content": [{"type": "input_text", "text": "q"}]}, {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "1"}], "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "stream": true, "max_output_tokens": 9, "include": ["message.output_text.logprobs"], "top_logprobs": 1, "reasoning": {"effort": "none"}, "metadata": {"a": "b"}}' > "$1/responses"
printf '\x04{"input": "q", "background": true, "stream": true, "max_output_tokens": 9}' > "$1/responses-background"
printf '\x04{"input": "q", "background": true, "store": true}' > "$1/responses-background-whole"
printf '\x00GET /v1/responses/resp_1?stream=true&starting_after=41 HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/responses/resp_1/cancel HTTP/1.1\r\nContent-Length: 0\r\n\r\n' > "$1/http-background"
printf '\x05{"lora_name": "sql", "lora_path": "/adapters/sql", "lora_int_id": 1}' > "$1/lora"
printf '\x04{"input": "q", "tool_choice": {"type": "function", "name": "f"}, "tools": [{"type": "function", "name": "f"}], "text": {"format": {"type": "json_object"}}}' > "$1/responses-forced"
printf '\x06{"model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "a"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "1"}]}, {"type": "text", "text": "more"}]}], "tools": [{"name": "f", "input_schema": {"type": "object"}}], "stream": true, "stop_sequences": ["END"], "thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u"}}' > "$1/anthropic"
printf '\x06{"max_tokens": 5, "messages": [{"role": "user", "content": "q"}], "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}], "tool_choice": {"type": "any", "disable_parallel_tool_use": true}}' > "$1/anthropic-forced"
printf '\x00OPTIONS /v1/chat/completions HTTP/1.1\r\nOrigin: https://a.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, x-b\r\n\r\nGET /health HTTP/1.1\r\nOrigin: https://b.example\r\n\r\n' > "$1/cors"
}

max_len=4096
rss=2048
case "$target" in
  request)
    sources="runtime/wire/request_codec.cpp runtime/wire/json_msgpack.cpp runtime/wire/utf8.cpp runtime/wire/protocol.cpp
      runtime/core/json_in_order.cpp" ;;
  grammar)
    sources="$(ls runtime/grammar/*.cpp | grep -v token_table_from_tokenizer) runtime/core/error.cpp"
    max_len=2048 ;;
  tokenizer) sources="$tokenizer_sources $tokenizer_libs"; rss=4096 ;;
  tokenizer_json) sources="$tokenizer_sources $tokenizer_libs"; max_len=16384 ;;
  checkpoint)
    sources="runtime/model/safetensors_reader.cpp runtime/model/config.cpp runtime/quant/quant_config.cpp
      runtime/core/mapped_file.cpp runtime/core/dtype.cpp runtime/core/error.cpp" ;;
  chat_template) sources="$tokenizer_sources $tokenizer_libs"; max_len=8192 ;;
  openai)
    sources="runtime/wire/http.cpp runtime/wire/openai.cpp runtime/wire/openai_responses.cpp runtime/wire/response_store.cpp runtime/wire/background_response.cpp runtime/wire/anthropic_messages.cpp runtime/wire/openai_lora.cpp
      runtime/wire/conversation_store.cpp runtime/wire/openai_conversations.cpp
      runtime/wire/tool_call_stream.cpp runtime/wire/openai_tokenize.cpp
      runtime/wire/openai_tool_choice.cpp runtime/wire/cors.cpp runtime/wire/request_codec.cpp runtime/wire/json_msgpack.cpp
      runtime/wire/utf8.cpp runtime/wire/protocol.cpp runtime/core/json_in_order.cpp runtime/core/error.cpp" ;;
  model_output)
    sources="runtime/serve/tool_calls.cpp runtime/serve/reasoning_split.cpp runtime/wire/tool_call_stream.cpp
      $tokenizer_sources $tokenizer_libs" ;;
  *)
    echo "usage: $0 TARGET [SECONDS]; TARGET: request grammar tokenizer tokenizer_json checkpoint chat_template model_output openai" >&2
    exit 2 ;;
esac
corpus="$out/$target-corpus"
mkdir -p "$corpus"
# shellcheck disable=SC2086  # the source lists are meant to split
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. "tests/fuzz/${target}_fuzzer.cpp" $sources \
  -o "$out/${target}_fuzzer"
"seed_$target" "$corpus"
"$out/${target}_fuzzer" -max_total_time="$secs" -artifact_prefix="$out/" -max_len="$max_len" -rss_limit_mb="$rss" \
  -timeout=10 "$corpus"
