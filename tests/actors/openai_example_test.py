#!/usr/bin/python3
"""examples/python/openai_chat.py against the real `troupe serve` binary (a model with the real
Qwen3 tokenizer): streamed and whole it prints the same answer, which is the `content` a plain
POST /v1/chat/completions returns; an unknown model is reported with the server's message and a
non-zero exit. examples/python/openai_embeddings.py ranks texts by the dot products of the float
vectors a plain POST /v1/embeddings returns (its base64 decodes to the same floats), and
examples/python/openai_rerank.py prints the results of a plain POST /v1/rerank in its order, and
examples/python/openai_classify.py (against a random classifier) the labels of a POST /v1/classify.
examples/python/openai_agent.py runs its loop over POST /v1/responses: a forced calculator call is
run and its result sent back with the model's own output items, and the next turn answers.
examples/python/anthropic_chat.py over POST /v1/messages prints, streamed and whole, the start of
the chat answer to the same prompt, and with --count the prompt's tokens chat's usage counts.
examples/python/openai_background.py gives the foreground response's text for a background one,
polled, and streamed with its connection dropped after a few events and resumed; and cancels one.

usage: openai_example_test.py TROUPE_BINARY SOURCE_DIR
"""
import json
import os
import re
import shutil
import tempfile
import subprocess
import sys
import urllib.request

troupe, source = sys.argv[1], sys.argv[2]
model = os.path.join(source, "tests", "data", "golden", "e2e-full-vocab")
tokenizer = os.path.join(source, "models", "qwen3-tokenizer")
example = os.path.join(source, "examples", "python", "openai_chat.py")
embeddings_example = os.path.join(source, "examples", "python", "openai_embeddings.py")
rerank_example = os.path.join(source, "examples", "python", "openai_rerank.py")
agent_example = os.path.join(source, "examples", "python", "openai_agent.py")
anthropic_example = os.path.join(source, "examples", "python", "anthropic_chat.py")
background_example = os.path.join(source, "examples", "python", "openai_background.py")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def start_server(*model_args):
    """`troupe serve` on free ports: (the process, its OpenAI API port or None) once it is ready."""
    proc = subprocess.Popen([troupe, "serve", *model_args, "--port", "0", "--metrics-port", "-1",
                             "--http-port", "0", "--num-kv-blocks", "64", "--max-model-len", "512"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    api_port = None
    for line in proc.stdout:
        m = re.search(r"OpenAI-compatible API on http://127\.0\.0\.1:(\d+)/v1", line)
        if m:
            api_port = int(m.group(1))
        if "ready" in line:
            break
    return proc, api_port


server, port = start_server("--model", model, "--tokenizer", tokenizer)
try:
    check(port is not None, "the banner names the API's port")
    base = f"http://127.0.0.1:{port}/v1"
    body = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 10, "temperature": 0,
            "ignore_eos": True}
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode())
    want = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    check(len(want) > 0, "a plain POST answers")
    run = lambda *a: subprocess.run([sys.executable, example, "--base-url", base, "--max-tokens", "10", "--temperature", "0",
                                     *a], capture_output=True, text=True, timeout=60)
    streamed, whole = run("Tell me a story"), run("--no-stream", "Tell me a story")
    # ignore_eos is not the example's: the model may stop earlier, never later, than the plain POST.
    got = streamed.stdout.rstrip("\n")
    check(streamed.returncode == 0 and got.strip() and want.startswith(got), "streamed: " + repr(streamed.stdout))
    check(whole.returncode == 0 and whole.stdout == streamed.stdout, "whole equals streamed: " + repr(whole.stdout))
    arun = lambda *a: subprocess.run([sys.executable, anthropic_example, "--base-url", f"http://127.0.0.1:{port}",
                                      "--max-tokens", "10", "--temperature", "0", *a],
                                     capture_output=True, text=True, timeout=60)
    a_streamed, a_whole = arun("Tell me a story"), arun("--no-stream", "Tell me a story")
    a_got = a_streamed.stdout.rstrip("\n")
    check(a_streamed.returncode == 0 and a_got.strip() and want.startswith(a_got),
          "anthropic example streamed: " + repr(a_streamed.stdout) + a_streamed.stderr)
    check(a_whole.returncode == 0 and a_whole.stdout == a_streamed.stdout, "anthropic example whole equals streamed")
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode())
    prompt_tokens = json.load(urllib.request.urlopen(req))["usage"]["prompt_tokens"]
    counted = arun("--count", "Tell me a story")
    check(counted.returncode == 0 and counted.stdout.strip() == str(prompt_tokens),
          f"anthropic example --count: {counted.stdout.strip()!r} vs chat's {prompt_tokens}")
    a_bad = arun("--model", "no-such-model", "hi")
    check(a_bad.returncode != 0 and "no-such-model" in a_bad.stderr, "anthropic example, an unknown model: " + a_bad.stderr.strip())
    bad = run("--model", "no-such-model", "hi")
    check(bad.returncode != 0 and "no-such-model" in bad.stderr, "an unknown model: " + bad.stderr.strip())
    texts = ["the KV cache lives in blocks", "a recipe for onion soup", "blocks of keys and values"]
    query = "paged attention"
    req = urllib.request.Request(base + "/embeddings", data=json.dumps({"input": [query] + texts}).encode())
    vecs = [d["embedding"] for d in sorted(json.load(urllib.request.urlopen(req))["data"], key=lambda d: d["index"])]
    check(len(vecs) == 4 and all(abs(sum(x * x for x in v) - 1) < 1e-4 for v in vecs), "unit-length embeddings")
    want = sorted(((sum(a * b for a, b in zip(vecs[0], v)), t) for v, t in zip(vecs[1:], texts)), reverse=True)
    ranked = subprocess.run([sys.executable, embeddings_example, "--base-url", base, query, *texts],
                            capture_output=True, text=True, timeout=60)
    lines = ranked.stdout.splitlines()
    check(ranked.returncode == 0 and [l.split("  ", 1)[1] for l in lines] == [t for _, t in want] and
          all(abs(float(l.split("  ", 1)[0]) - s) < 1e-4 for l, (s, _) in zip(lines, want)),
          "embeddings example ranks as the plain POST: " + repr(ranked.stdout) + ranked.stderr)
    req = urllib.request.Request(base + "/rerank", data=json.dumps({"query": query, "documents": texts, "top_n": 2}).encode())
    results = json.load(urllib.request.urlopen(req))["results"]
    ranked = subprocess.run([sys.executable, rerank_example, "--base-url", base, "--top-n", "2", query, *texts],
                            capture_output=True, text=True, timeout=60)
    want = [f"{r['relevance_score']:.4f}  {r['document']['text']}" for r in results]
    check(ranked.returncode == 0 and len(want) == 2 and ranked.stdout.splitlines() == want,
          "rerank example prints the plain POST's results: " + repr(ranked.stdout) + ranked.stderr)
    agent = subprocess.run([sys.executable, agent_example, "--base-url", base, "--force-tool", "--no-think",
                            "--max-tokens", "120", "--temperature", "0", "What is 2 ** 10?"],
                           capture_output=True, text=True, timeout=120)
    check(agent.returncode == 0 and "[tool] calculator(" in agent.stderr and " -> " in agent.stderr,
          "agent example: a call run, its result sent back, an answer: " + agent.stderr[-400:])
    # The same answer three ways: polled, streamed with a drop and a resume, and whole in the foreground.
    fg_body = {"input": "Tell me a story", "max_output_tokens": 12, "temperature": 0, "store": False, "ignore_eos": True}
    req = urllib.request.Request(base + "/responses", data=json.dumps(fg_body).encode())
    fg = json.load(urllib.request.urlopen(req))
    fg_text = "".join(p["text"] for it in fg["output"] if it["type"] == "message" for p in it["content"])
    bg = lambda *a: subprocess.run([sys.executable, background_example, "--base-url", base, "--max-tokens", "12",
                                    "--temperature", "0", *a, "Tell me a story"], capture_output=True, text=True, timeout=120)
    polled, resumed, cancelled = bg(), bg("--stream", "--drop-after", "4"), bg("--cancel", "--max-tokens", "400")
    # (ignore_eos is not the example's: the model may stop earlier, never later, than the plain POST)
    check(polled.returncode == 0 and polled.stdout.rstrip("\n") and fg_text.startswith(polled.stdout.rstrip("\n"))
          and "[queued] resp_" in polled.stderr, "background example: polled to the foreground's answer: "
          + repr(polled.stdout) + " vs " + repr(fg_text) + polled.stderr)
    check(resumed.returncode == 0 and resumed.stdout == polled.stdout and "[reconnect] resp_" in resumed.stderr,
          "background example: streamed, dropped and resumed, the same text: " + repr(resumed.stdout) + resumed.stderr)
    check(cancelled.returncode == 0 and "[cancelled] resp_" in cancelled.stderr,
          "background example: cancelled: " + cancelled.stderr)
finally:
    server.terminate()
    server.wait(timeout=30)

# examples/python/openai_classify.py against a random sequence classifier (make-checkpoint
# --num-labels): it prints, per text, the label and probability a plain POST /v1/classify gives;
# against the causal model above it would exit with the server's refusal (e2e tests cover that).
classify_example = os.path.join(source, "examples", "python", "openai_classify.py")
classifier = tempfile.mkdtemp(prefix="troupe-example-classifier-")
made = subprocess.run([troupe, "make-checkpoint", "--preset", "tiny", "--num-labels", "3", "--force", "--out", classifier],
                      capture_output=True, text=True)
check(made.returncode == 0, "make-checkpoint --num-labels 3: " + made.stdout + made.stderr)
server, port = start_server("--model", classifier)
try:
    base = f"http://127.0.0.1:{port}/v1"
    texts = ["What a lovely day", "I hated every minute"]
    req = urllib.request.Request(base + "/classify", data=json.dumps({"input": texts}).encode())
    data = json.load(urllib.request.urlopen(req))["data"]
    shown = subprocess.run([sys.executable, classify_example, "--base-url", base, *texts],
                           capture_output=True, text=True, timeout=60)
    want = [f"{d['label']}  {max(d['probs']):.4f}  {t}" for d, t in zip(data, texts)]
    check(shown.returncode == 0 and len(want) == 2 and shown.stdout.splitlines() == want,
          "classify example prints the plain POST's labels: " + repr(shown.stdout) + shown.stderr)
finally:
    server.terminate()
    server.wait(timeout=30)
    shutil.rmtree(classifier, ignore_errors=True)

sys.exit(1 if failures else 0)
