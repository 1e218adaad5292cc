#!/usr/bin/env python3
"""What beam search (`use_beam_search`, width n) costs on a running `troupe serve` against greedy
decoding of the same prompt: wall seconds for max_tokens tokens, their ratio, the probe requests
the search ran (from /metrics: finished requests), and the prefix-cache hits that kept each probe
to its last partial block.

    troupe serve --model DIR --port 7791 --metrics-port 7793 --http-port -1 &
    /usr/bin/python3 bench/serving/beam_search.py --port 7791 --metrics-port 7793
"""
import argparse
import os
import random
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from troupe_client import Client  # noqa: E402


def finished_requests(host, port):
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    return sum(float(v) for v in re.findall(r"^troupe:request_success_total\{[^}]*\} (\S+)$", text, re.M))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--metrics-port", type=int, required=True)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--vocab", type=int, default=150000)
    a = ap.parse_args()
    rng = random.Random(5)
    prompt = [rng.randrange(a.vocab) for _ in range(a.prompt_len)]
    base = {"prompt_ids": prompt, "max_tokens": a.max_tokens, "ignore_eos": True}
    with Client(a.host, a.port) as c:
        c.complete(prompt_ids=[1, 2, 3], max_tokens=2)  # warm
        t0 = time.perf_counter()
        c.complete(**base, temperature=0.0)
        greedy = time.perf_counter() - t0
        print(f"prompt {a.prompt_len} tokens, {a.max_tokens} tokens out")
        print(f"  {'search':14s} {'seconds':>8s} {'x greedy':>9s} {'probes':>7s}")
        print(f"  {'greedy':14s} {greedy:8.2f} {1.0:9.2f} {'-':>7s}")
        for w in a.widths:
            before = finished_requests(a.host, a.metrics_port)
            t0 = time.perf_counter()
            c.choices(**base, use_beam_search=True, n=w)
            dt = time.perf_counter() - t0
            probes = finished_requests(a.host, a.metrics_port) - before  # the completions are not requests
            print(f"  {'beam width ' + str(w):14s} {dt:8.2f} {dt / greedy:9.2f} {probes:7.0f}")


if __name__ == "__main__":
    main()
