#!/usr/bin/python3
"""The Python client against the real `troupe serve` binary: greedy and seeded outputs equal
`troupe generate --json` for the same request (and with a LoRA adapter, `troupe generate --lora`) (and n completions the request with seed + i),
logprobs / prompt_logprobs / logit_bias gathered by complete_all, interleaved streaming iterators on one connection, cancel, errors as
TroupeError, SIGTERM ending the server with a final done, and structured output (response_format,
structured_outputs) on a model with the real Qwen3 tokenizer.

usage: python_client_test.py TROUPE_BINARY SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

troupe, source = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(source, "examples", "python"))
from troupe_client import Client, TroupeError  # noqa: E402

model = os.path.join(source, "tests", "data", "golden", "tiny-dense")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


adapter = os.path.join(source, "tests", "data", "golden", "tiny-dense-lora", "adapter")


def generate_cli(ids, max_tokens, temperature=None, seed=None, lora=None):
    cmd = [troupe, "generate", "--model", model, "--ids", ",".join(map(str, ids)), "--max-tokens", str(max_tokens),
           "--ignore-eos", "--json"]
    if lora is not None:
        cmd += ["--lora", lora]
    if temperature is not None:
        cmd += ["--temperature", str(temperature)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["ids"]


def start_server(model_dir, extra=()):
    proc = subprocess.Popen([troupe, "serve", "--model", model_dir, "--port", "0", "--metrics-port", "-1", "--http-port", "-1",
                             "--num-kv-blocks", "256", "--max-model-len", "1024", "--set",
                             "server.shutdown_grace_ms=200", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = None
    banner = []
    for line in proc.stdout:
        banner.append(line)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if m:
            found = int(m.group(1))
        if "ready" in line:
            break
    check(found is not None, "server printed its port: " + "".join(banner).strip().replace("\n", " | "))
    return proc, found


server, port = start_server(model, ["--lora", "peft=" + adapter])

try:
    with Client("127.0.0.1", port) as c:
        check(c.health()["status"] == "ok", "health")
        check(c.models()[0]["vocab_size"] == 4096, "models")

        # Same request, same tokens as `troupe generate` (greedy and seeded).
        prompt = [11, 22, 33, 44]
        _, ids, done = c.complete(prompt_ids=prompt, max_tokens=12, temperature=0.0, ignore_eos=True)
        check(ids == generate_cli(prompt, 12, temperature=0), "greedy equals troupe generate")
        check(done["finish_reason"] == "length" and done["usage"]["completion_tokens"] == 12, "done event")
        _, ids, _ = c.complete(prompt_ids=prompt, max_tokens=12, temperature=0.9, seed=1234, ignore_eos=True)
        check(ids == generate_cli(prompt, 12, temperature=0.9, seed=1234), "seeded equals troupe generate")
        # A batch of prompts: completion p of prompts=[...] is what prompt p gives alone.
        other = [9, 8, 7]
        batch = {}
        for ev in c.generate(prompts=[prompt, other], max_tokens=4, temperature=0.0, ignore_eos=True):
            batch.setdefault(ev.get("index", 0), []).extend(ev["ids"] if ev["event"] == "token" else [])
        check(batch == {0: generate_cli(prompt, 4, temperature=0), 1: generate_cli(other, 4, temperature=0)},
              f"a batch of prompts equals troupe generate per prompt: {batch}")
        # A LoRA adapter the server serves (--lora peft=DIR) by name, as `troupe generate --lora DIR`.
        _, ids, _ = c.complete(prompt_ids=prompt, max_tokens=12, temperature=0.0, ignore_eos=True, adapter="peft")
        check(ids == generate_cli(prompt, 12, temperature=0, lora=adapter) and ids != generate_cli(prompt, 12, 0),
              "adapter equals troupe generate --lora")
        check([m["name"] for m in c.models()] == ["tiny-dense", "peft"] and c.models()[1]["parent"] == "tiny-dense",
              "models lists the adapter")

        # Everything a request reports, streamed or not: logprobs, prompt_logprobs (None first),
        # and logit_bias with OpenAI's string keys forcing one token.
        for stream in (True, False):
            r = c.complete_all(prompt_ids=prompt, max_tokens=3, temperature=0.0, ignore_eos=True, stream=stream,
                               logprobs=2, prompt_logprobs=1, logit_bias={"77": 100})
            pl = r["prompt_logprobs"]
            check(r["ids"] == [77, 77, 77] and len(r["logprobs"]) == 3, f"logit_bias and logprobs (stream={stream})")
            check(pl is not None and len(pl) == len(prompt) and pl[0] is None
                  and all(len(x["top"]) == 1 and x["logprob"] <= 0 for x in pl[1:]),
                  f"prompt_logprobs (stream={stream})")

        # n completions: completion i is the request with seed + i, each with its own done.
        for stream in (True, False):
            got = c.choices(prompt_ids=prompt, max_tokens=6, temperature=0.9, seed=77, ignore_eos=True, n=3,
                            stream=stream)
            check([g["ids"] for g in got] == [generate_cli(prompt, 6, temperature=0.9, seed=77 + i) for i in range(3)]
                  and [g["done"]["index"] for g in got] == [0, 1, 2], f"n=3 completions (stream={stream})")

        # `troupe client --n` prints each completion whole, in index order.
        out = subprocess.run([troupe, "client", "--port", str(port), "--ids", ",".join(map(str, prompt)), "--n", "2",
                              "--seed", "77", "--temperature", "0.9", "--max-tokens", "6", "--show-ids"],
                             capture_output=True, text=True)
        printed = [[int(x) for x in re.findall(r"\[(\d+)\]", part)]
                   for part in re.split(r"--- completion \d+ ---\n", out.stdout)[1:]]
        check(out.returncode == 0 and printed == [generate_cli(prompt, 6, temperature=0.9, seed=77 + i) for i in range(2)],
              "troupe client --n 2: " + out.stdout.replace("\n", " | ") + out.stderr.strip())

        # Two streams on one connection, consumed alternately.
        a = c.generate(prompt_ids=[1, 2], max_tokens=5, temperature=0.0, ignore_eos=True)
        b = c.generate(prompt_ids=[3, 4], max_tokens=5, temperature=0.0, ignore_eos=True)
        got_a, got_b = [], []
        for ea, eb in zip(a, b):
            got_a += ea.get("ids", []) if ea["event"] == "token" else []
            got_b += eb.get("ids", []) if eb["event"] == "token" else []
        check(got_a == generate_cli([1, 2], 5, 0) and got_b == generate_cli([3, 4], 5, 0), "interleaved streams")

        # Errors are exceptions with the code.
        try:
            c.complete(prompt_ids=[1], max_tokens=0)
            check(False, "max_tokens 0 refused")
        except TroupeError as e:
            check(e.code == "invalid_value" and "max_tokens" in e.message, "max_tokens 0 refused: " + str(e))

        # OpenAI's response_format as a Python dict reaches the server whole: this model has no
        # tokenizer, so structured output is refused as unsupported (not as a malformed field).
        try:
            c.complete(prompt_ids=[1], max_tokens=2, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {}}}})
            check(False, "structured output refused without a tokenizer")
        except TroupeError as e:
            check(e.code == "unsupported" and "structured output" in e.message,
                  "structured output refused without a tokenizer: " + str(e))

        # Cancel.
        s = c.generate(prompt_ids=[5], max_tokens=900, temperature=0.0, ignore_eos=True, request_id="long")
        next(s)
        c.cancel("long")
        last = list(s)[-1]
        check(last["event"] == "done" and last["finish_reason"] == "cancelled", "cancel")

        # SIGTERM while a request runs: it ends with done, the server exits promptly.
        s = c.generate(prompt_ids=[6], max_tokens=900, temperature=0.0, ignore_eos=True, request_id="sig")
        next(s)
        t0 = time.time()
        server.send_signal(signal.SIGTERM)
        last = list(s)[-1]
        check(last["event"] == "done" and last["finish_reason"] in ("cancelled", "length"),
              "running request ends with done on SIGTERM (" + last.get("finish_reason", "?") + ")")
    rc = server.wait(timeout=15)
    tail = server.stdout.read()
    check(rc == 0 and "stopped" in tail, f"server exited 0 within {time.time() - t0:.2f} s")
finally:
    if server.poll() is None:
        server.kill()

# Structured output through the Python client, on a random-weight model with the real Qwen3
# tokenizer: OpenAI's response_format gives JSON that json.loads reads and the schema allows, and
# vLLM's structured_outputs a choice, each ended by EOS.
ckpt = tempfile.mkdtemp(prefix="troupe_py_structured_")
subprocess.run([troupe, "make-checkpoint", "--preset", "tiny", "--out", ckpt], check=True, capture_output=True)
server, port = start_server(ckpt)
try:
    with Client("127.0.0.1", port) as c:
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "colour": {"enum": ["red", "blue"]},
                                                    "n": {"type": "integer", "minimum": 0, "maximum": 99}},
                  "required": ["ok", "colour", "n"]}
        for seed in (1, 2):
            text, _, done = c.complete(prompt="Answer:", max_tokens=80, seed=seed, response_format={
                "type": "json_schema", "json_schema": {"name": "answer", "schema": schema}})
            try:
                v = json.loads(text)
            except ValueError:
                v = None
            check(done["finish_reason"] == "stop" and isinstance(v, dict) and isinstance(v.get("ok"), bool)
                  and v.get("colour") in ("red", "blue") and 0 <= v.get("n", -1) <= 99,
                  f"response_format json_schema (seed {seed}): {text!r}")
            text, _, done = c.complete(prompt="Pick:", max_tokens=20, seed=seed,
                                       structured_outputs={"choice": ["left", "right", "up"]})
            check(done["finish_reason"] == "stop" and text in ("left", "right", "up"),
                  f"structured_outputs choice (seed {seed}): {text!r}")

        # `troupe client --thinking-budget 2`: after a prompt that opened the think block, two tokens
        # of thinking, then </think> (151668), whatever the random model would have written.
        out = subprocess.run([troupe, "client", "--port", str(port), "--prompt", "<|im_start|>assistant\n<think>\n",
                              "--thinking-budget", "2", "--max-tokens", "4", "--seed", "3", "--temperature", "0.8",
                              "--show-ids", "--cache-salt", "tenant-a"], capture_output=True, text=True)
        ids = [int(x) for x in re.findall(r"\[(\d+)\]", out.stdout)]
        check(out.returncode == 0 and len(ids) == 4 and ids[2] == 151668 and 151668 not in ids[:2],
              "troupe client --thinking-budget 2: " + out.stdout.replace("\n", " | ") + out.stderr.strip())

        # `troupe client --beam-search --n 3`: three beams, best first, each 4 tokens; a search is
        # deterministic, so a second run prints the same.
        beam_cmd = [troupe, "client", "--port", str(port), "--ids", "9707,11,1879", "--beam-search", "--n", "3",
                    "--max-tokens", "4", "--show-ids"]
        first, again = (subprocess.run(beam_cmd, capture_output=True, text=True) for _ in range(2))
        beams = [[int(x) for x in re.findall(r"\[(\d+)\]", part)] for part in first.stdout.split("--- completion")[1:]]
        check(first.returncode == 0 and len(beams) == 3 and all(len(b) == 4 for b in beams)
              and len({tuple(b) for b in beams}) == 3 and first.stdout == again.stdout,
              "troupe client --beam-search --n 3: " + first.stdout.replace("\n", " | ") + first.stderr.strip())

        # Embeddings: each exactly what `troupe embed` prints for the same texts.
        texts = ["hello world", "a second, longer text"]
        got = c.embed(texts)
        cli = subprocess.run([troupe, "embed", "--model", ckpt, *sum((["--prompt", t] for t in texts), [])],
                             capture_output=True, text=True)
        want = [d["embedding"] for d in json.loads(cli.stdout)["data"]] if cli.returncode == 0 else None
        check(want is not None and len(got) == 2 and all(abs(a - b) == 0 for g, w in zip(got, want) for a, b in zip(g, w))
              and all(len(g) == len(w) for g, w in zip(got, want)), "embed equals troupe embed: " + cli.stderr.strip())
        # Reranking: one probability per document, in order, each exactly what `troupe rerank`
        # (no server) gives; the same document scores the same.
        query, docs = "Which colour is the sky?", ["The sky is blue.", "Grass is green.", "The sky is blue."]
        scores = c.rerank(query, docs)
        cli = subprocess.run([troupe, "rerank", "--model", ckpt, "--query", query, *sum((["--document", d] for d in docs), [])],
                             capture_output=True, text=True)
        offline = {r["index"]: r["relevance_score"] for r in json.loads(cli.stdout)["results"]} if cli.returncode == 0 else {}
        check(len(scores) == 3 and all(0.0 <= x <= 1.0 for x in scores) and scores[0] == scores[2]
              and [offline.get(i) for i in range(3)] == scores, f"rerank equals troupe rerank: {scores} {offline} {cli.stderr.strip()}")
        # One query per document: each pair scores as `troupe rerank` scores it alone.
        other = "Which colour is grass?"
        pairs = c.rerank([query, other, query], docs)
        cli = subprocess.run([troupe, "rerank", "--model", ckpt, "--query", other, "--document", docs[1]],
                             capture_output=True, text=True)
        alone = json.loads(cli.stdout)["results"][0]["relevance_score"] if cli.returncode == 0 else None
        check(pairs == [scores[0], alone, scores[2]], f"rerank with a query per document: {pairs} {alone} {cli.stderr.strip()}")
        try:
            c.rerank("q", [])
            check(False, "rerank without documents refused")
        except TroupeError as e:
            check(e.code == "invalid_value" and "documents" in e.message, "rerank without documents: " + str(e))
        # classify needs a sequence classifier (its label probabilities: e2e_rerank_test over msgpack).
        try:
            c.classify(["a", "b"])
            check(False, "classify on a causal model refused")
        except TroupeError as e:
            check(e.code == "unsupported" and "not a sequence classifier" in e.message, "classify on a causal model: " + str(e))
finally:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
    shutil.rmtree(ckpt, ignore_errors=True)

sys.exit(1 if failures else 0)
