#!/usr/bin/env python3
"""What speculative decoding gives on running `troupe serve` instances: the same requests against
a server with drafts (--speculative-tokens K, by prompt lookup or with --speculative-model DIR)
and one without, one request at a
time, decode speed (completion tokens per second after the first token) for each and their
ratio, the outputs compared token for token, and the draft acceptance from the drafting server's
/metrics. Workloads: greedy from a random prompt (random-weight models fall into loops: the
favourable case), seeded sampling at temperature 0.8 (little repeats: few drafts), and a prompt
made of one passage pasted twice (the second copy's continuation is guessable); then greedy requests sent at once (a batch:
total completion tokens per second).

    troupe serve --model DIR --port 7791 --metrics-port 7793 --speculative-tokens 4 &
    troupe serve --model DIR --port 7792 --metrics-port -1 --http-port -1 &
    python3 bench/serving/speculative.py --port 7791 --metrics-port 7793 --port-plain 7792
"""
import argparse
import os
import threading
import random
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from troupe_client import Client  # noqa: E402


def counters(host, port):
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    out = {}
    for name in ("spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total"):
        m = re.search(r"^troupe:" + name + r"\{[^}]*\} (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def decode_rate(c, fields):
    """Tokens per second after the first token, and the ids."""
    ids, first = [], None
    t0 = time.perf_counter()
    for ev in c.generate(**fields):
        if ev["event"] == "token" and ev["ids"]:
            if first is None:
                first = time.perf_counter()
            ids += ev["ids"]
    t1 = time.perf_counter()
    return (len(ids) - 1) / (t1 - first), ids, t1 - t0


def concurrent_throughput(host, port, requests):
    """Completion tokens per second over all of `requests` sent at once (one connection each)."""
    results = [None] * len(requests)

    def run(i):
        with Client(host, port) as c:
            results[i] = c.complete(**requests[i])[1]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    return sum(len(r) for r in results) / dt, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True, help="the server with --speculative-tokens")
    ap.add_argument("--metrics-port", type=int, required=True, help="its /metrics port")
    ap.add_argument("--port-plain", type=int, required=True, help="a server without drafts")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=150000)
    ap.add_argument("--concurrent", type=int, default=8, help="greedy requests at once for the batched row (0: skip)")
    a = ap.parse_args()
    rng = random.Random(3)
    passage = [rng.randrange(a.vocab) for _ in range(200)]
    workloads = [
        ("greedy, random prompt", {"prompt_ids": [rng.randrange(a.vocab) for _ in range(64)], "temperature": 0.0}),
        ("seeded, temperature 0.8", {"prompt_ids": [rng.randrange(a.vocab) for _ in range(64)], "temperature": 0.8,
                                     "seed": 11}),
        ("greedy, passage pasted twice", {"prompt_ids": passage + passage[:150], "temperature": 0.0}),
    ]
    print(f"{a.max_tokens} tokens per request, decode tokens/s after the first token:")
    print(f"  {'workload':32s} {'plain':>8s} {'drafts':>8s} {'ratio':>7s} {'accepted':>9s} {'same':>5s}")
    with Client(a.host, a.port) as spec, Client(a.host, a.port_plain) as plain:
        warm = {"prompt_ids": [1, 2, 3], "max_tokens": 4, "ignore_eos": True}
        spec.complete(**warm)
        plain.complete(**warm)
        for name, fields in workloads:
            fields = dict(fields, max_tokens=a.max_tokens, ignore_eos=True)
            before = counters(a.host, a.metrics_port)
            rate_s, ids_s, _ = decode_rate(spec, fields)
            after = counters(a.host, a.metrics_port)
            rate_p, ids_p, _ = decode_rate(plain, fields)
            drafted = after["spec_decode_num_draft_tokens_total"] - before["spec_decode_num_draft_tokens_total"]
            acc = after["spec_decode_num_accepted_tokens_total"] - before["spec_decode_num_accepted_tokens_total"]
            acc_text = f"{acc:.0f}/{drafted:.0f}"
            print(f"  {name:32s} {rate_p:8.2f} {rate_s:8.2f} {rate_s / rate_p:7.2f} {acc_text:>9s} "
                  f"{'yes' if ids_s == ids_p else 'NO':>5s}")
    if a.concurrent > 0:
        reqs = [{"prompt_ids": [rng.randrange(a.vocab) for _ in range(64)], "temperature": 0.0,
                 "max_tokens": a.max_tokens, "ignore_eos": True} for _ in range(a.concurrent)]
        before = counters(a.host, a.metrics_port)
        tput_s, outs_s = concurrent_throughput(a.host, a.port, reqs)
        after = counters(a.host, a.metrics_port)
        tput_p, outs_p = concurrent_throughput(a.host, a.port_plain, reqs)
        drafted = after["spec_decode_num_draft_tokens_total"] - before["spec_decode_num_draft_tokens_total"]
        acc = after["spec_decode_num_accepted_tokens_total"] - before["spec_decode_num_accepted_tokens_total"]
        name = f"{a.concurrent} greedy at once (total tok/s)"
        acc_text = f"{acc:.0f}/{drafted:.0f}"
        print(f"  {name:32s} {tput_p:8.2f} {tput_s:8.2f} {tput_s / tput_p:7.2f} {acc_text:>9s} "
              f"{'yes' if outs_s == outs_p else 'NO':>5s}")


if __name__ == "__main__":
    main()
