#!/usr/bin/env python3
"""What n completions of one prompt cost on a running `troupe serve`, against one completion of the
same prompt length: with the prefix cache the prompt is computed once and the other completions
start from its blocks, so n adds decode work only. Optionally also against a server started with
--no-prefix-cache (every completion computes the prompt). Each request gets a distinct random
prompt, so nothing is reused across requests; one run, one machine, ratios only.

    troupe serve --model DIR --port 7791 &  troupe serve --model DIR --port 7792 --metrics-port -1 --http-port -1 --no-prefix-cache &
    python3 bench/serving/n_completions.py --port 7791 --port-no-cache 7792 --tokens 1024 --n 4
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from troupe_client import Client  # noqa: E402


def timed(c, prompt, n, max_tokens, seed):
    t = time.perf_counter()
    got = c.choices(prompt_ids=prompt, max_tokens=max_tokens, temperature=0.8, seed=seed, ignore_eos=True, n=n,
                    stream=False)
    dt = time.perf_counter() - t
    if len(got) != n or any(len(g["ids"]) != max_tokens for g in got):
        sys.exit("a completion is missing or short")
    computed = sum(len(prompt) - g["done"]["usage"]["cached_prompt_tokens"] for g in got)
    return dt, computed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7711, help="a server with the prefix cache on (the default)")
    ap.add_argument("--port-no-cache", type=int, help="a server started with --no-prefix-cache")
    ap.add_argument("--tokens", type=int, default=1024, help="prompt length")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=150000)
    a = ap.parse_args()
    rng = random.Random(1)
    prompt = lambda: [rng.randrange(a.vocab) for _ in range(a.tokens)]  # noqa: E731
    rows = []
    with Client(a.host, a.port) as c:
        timed(c, prompt()[:64], 1, 2, 0)  # warm-up
        one, one_computed = timed(c, prompt(), 1, a.max_tokens, 1)
        many, many_computed = timed(c, prompt(), a.n, a.max_tokens, 2)
    rows.append(("n = 1", one, one_computed))
    rows.append((f"n = {a.n}", many, many_computed))
    if a.port_no_cache:
        with Client(a.host, a.port_no_cache) as c:
            off, off_computed = timed(c, prompt(), a.n, a.max_tokens, 3)
        rows.append((f"n = {a.n}, --no-prefix-cache", off, off_computed))
    print(f"prompt of {a.tokens} tokens, {a.max_tokens} tokens per completion (not streamed):")
    print(f"  {'request':32s} {'wall s':>8s} {'x n=1':>7s} {'prompt tokens computed':>24s}")
    for name, t, computed in rows:
        print(f"  {name:32s} {t:8.2f} {t / one:7.2f} {computed:24d}")


if __name__ == "__main__":
    main()
