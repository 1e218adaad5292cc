#!/usr/bin/env python3
"""What prompt_logprobs costs a request on a running `troupe serve`: the same prompt length scored
(prompt_logprobs) and plainly prefilled (max_tokens 1), alternating, each prompt distinct so no
prefix is reused. Prints ms per prompt token for both and their ratio (one run, one machine).

    python3 bench/serving/prompt_logprobs_cost.py --port 7711 --tokens 512 --k 5
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
from troupe_client import Client  # noqa: E402


def timed(c, prompt, k):
    fields = {"prompt_ids": prompt, "max_tokens": 1, "temperature": 0, "stream": False}
    if k is not None:
        fields["prompt_logprobs"] = k
    t = time.perf_counter()
    _, _, done = c.complete(**fields)
    dt = time.perf_counter() - t
    if k is not None and len(done["prompt_logprobs"]) != len(prompt):
        sys.exit("prompt_logprobs: wrong length")
    if done["usage"]["cached_prompt_tokens"] != 0:
        sys.exit("a prefix was reused: the comparison needs distinct prompts")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7711)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--k", type=int, default=5, help="alternatives per position")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=150000)
    a = ap.parse_args()
    rng = random.Random(1)
    plain, scored = [], []
    with Client(a.host, a.port) as c:
        timed(c, [rng.randrange(a.vocab) for _ in range(a.tokens)], None)  # warm-up
        for _ in range(a.rounds):
            plain.append(timed(c, [rng.randrange(a.vocab) for _ in range(a.tokens)], None))
            scored.append(timed(c, [rng.randrange(a.vocab) for _ in range(a.tokens)], a.k))
    p, s = min(plain), min(scored)
    print(f"prompt of {a.tokens} tokens, best of {a.rounds}:")
    print(f"  plain prefill        {1000 * p / a.tokens:8.3f} ms/token")
    print(f"  prompt_logprobs={a.k:<3} {1000 * s / a.tokens:8.3f} ms/token")
    print(f"  ratio                {s / p:8.2f}x")


if __name__ == "__main__":
    main()
