#!/usr/bin/env python3
"""Troupe's tokenizer against Hugging Face `tokenizers` (the peer) in one run, one thread each,
on the same >= 10 MB multilingual corpus: load time, encode throughput, the ratio, and the
pathological inputs. It also checks that both give the same ids for every document.

The peer is never a dependency of Troupe's build or tests; install it only to run this:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install tokenizers
    cmake --build build --target tokenizer_bench
    .venv-bench/bin/python bench/tokenizer/run_bench.py --bench build/bench/tokenizer/tokenizer_bench

Rounds alternate Troupe and the peer so both see the same machine load; best and median of
the rounds are reported.
"""
import argparse
import array
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import time

# One thread for the peer, set before it is imported.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pathological(kind, size):
    if kind == "random_letters":
        rnd = random.Random(5)
        return "".join(chr(rnd.randrange(ord("a"), ord("z") + 1)) for _ in range(size))
    unit = {"letter_a": "a", "spaces": " ", "cjk": "\u4e00", "punct": "!"}[kind]
    return unit * (size // len(unit.encode("utf-8")))


def read_troupe_ids(path):
    data = array.array("i")
    with open(path, "rb") as f:
        data.frombytes(f.read())
    docs, i = [], 0
    while i < len(data):
        n = data[i]
        docs.append(data[i + 1:i + 1 + n].tolist())
        i += 1 + n
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the tokenizer_bench binary")
    ap.add_argument("--model", default=str(ROOT / "models/qwen3-tokenizer"))
    ap.add_argument("--corpus", default=None, help="JSONL corpus (made with make_corpus.py when absent)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None, help="scratch directory (default: next to the binary)")
    args = ap.parse_args()

    from tokenizers import Tokenizer, __version__ as hf_version

    work = pathlib.Path(args.work or pathlib.Path(args.bench).resolve().parent)
    corpus = pathlib.Path(args.corpus or work / "tokenizer_corpus.jsonl")
    if not corpus.exists():
        subprocess.run([sys.executable, str(ROOT / "bench/tokenizer/make_corpus.py"), "--out", str(corpus)], check=True)
    docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    tok_json = str(pathlib.Path(args.model) / "tokenizer.json")
    ids_path = work / "troupe_ids.bin"

    troupe_rounds, hf_rounds = [], []
    troupe_load, hf_load = [], []
    hf_ids = None
    for r in range(args.rounds):
        cmd = [args.bench, "--model", args.model, "--corpus", str(corpus), "--repeat", "1", "--skip-pathological"]
        if r == 0:
            cmd += ["--ids-out", str(ids_path)]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        troupe_rounds.append(res["encode_mb_per_s"]["best"])
        troupe_load.append(res["load_ms"])

        loads = []
        for _ in range(5):
            t0 = time.perf_counter()
            hf = Tokenizer.from_file(tok_json)
            loads.append((time.perf_counter() - t0) * 1e3)
        hf_load.append(statistics.median(loads))
        t0 = time.perf_counter()
        out = [hf.encode(d, add_special_tokens=False).ids for d in docs]
        hf_rounds.append(nbytes / 1e6 / (time.perf_counter() - t0))
        if hf_ids is None:
            hf_ids = out

    troupe_ids = read_troupe_ids(ids_path)
    mismatched = sum(1 for a, b in zip(troupe_ids, hf_ids) if a != b) + abs(len(troupe_ids) - len(hf_ids))
    tokens = sum(len(x) for x in hf_ids)

    print(f"corpus: {corpus} ({len(docs)} documents, {nbytes / 1e6:.2f} MB, {tokens} tokens)")
    print(f"peer: Hugging Face tokenizers {hf_version}, one thread; rounds: {args.rounds}")
    print(f"ids identical to the peer: {len(docs) - mismatched} / {len(docs)} documents")
    print()
    print("| | Troupe | HF tokenizers | ratio |")
    print("|---|---|---|---|")
    tb, hb = max(troupe_rounds), max(hf_rounds)
    tm, hm = statistics.median(troupe_rounds), statistics.median(hf_rounds)
    print(f"| encode MB/s, best of {args.rounds} | {tb:.1f} | {hb:.2f} | {tb / hb:.1f}x |")
    print(f"| encode MB/s, median | {tm:.1f} | {hm:.2f} | {tm / hm:.1f}x |")
    tl = statistics.median(x["median"] for x in troupe_load)
    tlc = statistics.median(x["cpu_median"] for x in troupe_load)
    hl = statistics.median(hf_load)
    print(f"| load ms (median wall) | {tl:.0f} | {hl:.0f} | {hl / tl:.1f}x |")
    print(f"| load ms (Troupe CPU time) | {tlc:.0f} | | |")
    print()

    res = json.loads(subprocess.run([args.bench, "--model", args.model, "--loads", "1"], check=True,
                                    capture_output=True, text=True).stdout)
    print("| pathological input | size | Troupe ms | ns/byte | HF ms | ns/byte |")
    print("|---|---|---|---|---|---|")
    for kind, sizes in res["pathological"].items():
        for label, v in sizes.items():
            size = int(label[:-2]) * 1000
            if size > 1_000_000:  # the peer would take tens of seconds; Troupe's figure alone
                print(f"| {kind} | {label} | {v['ms']:.2f} | {v['ms'] * 1e6 / size:.0f} | | |")
                continue
            text = pathological(kind, size)
            best = float("inf")
            for _ in range(1 if size >= 1_000_000 else 3):
                t0 = time.perf_counter()
                hf.encode(text, add_special_tokens=False)
                best = min(best, time.perf_counter() - t0)
            print(f"| {kind} | {label} | {v['ms']:.2f} | {v['ms'] * 1e6 / size:.0f} | {best * 1e3:.1f} | "
                  f"{best * 1e9 / size:.0f} |")
    return 0 if mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
