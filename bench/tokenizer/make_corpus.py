#!/usr/bin/env python3
"""Builds the tokenizer benchmark corpus: >= 10 MB of multilingual documents, deterministically
(fixed seed, sorted inputs) from text the repository already has: the tokenizer and chat-template
reference cases (20+ scripts, emoji, code, URLs, math), the repository's source and docs, mixed
and varied so words repeat with a long tail as in real text.

Output: JSON lines {"text": ...}, one document per line. The same commit gives the same file;
the script prints its SHA-256 so benchmark runs can name the corpus they used.

    python3 bench/tokenizer/make_corpus.py --out build/tokenizer_corpus.jsonl
"""
import argparse
import hashlib
import json
import pathlib
import random
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = 20250601
TARGET_BYTES = 10_500_000

WORD_RE = re.compile(r"\w+|\s+|[^\w\s]+")


def load_cases():
    texts = []
    with open(ROOT / "tests/data/tokenizer/qwen3_tokenizer_cases.jsonl", encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            texts.append((case["category"], case["text"]))
    with open(ROOT / "tests/data/chat_template/cases.jsonl", encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            texts.append(("chat", case["text"]))
    return texts


def load_sources():
    """Tracked source and docs files (never the model or test binaries), sorted."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        files = sorted(out.split())
    except (OSError, subprocess.CalledProcessError):
        files = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file())
    keep = []
    for name in files:
        if name.startswith(("models/", "tests/data/", "build")) or "/." in name:
            continue
        if not re.search(r"\.(cpp|hpp|h|py|md|txt|cmake|toml|sh)$|CMakeLists\.txt$", name):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            keep.append((name, text))
    return keep


def mutate_word(rng, word):
    """New surface forms of a word, so the vocabulary has a long tail (cache misses)."""
    r = rng.random()
    if r < 0.05:
        return word.upper()
    if r < 0.10:
        return word.capitalize()
    if r < 0.13 and len(word) > 3:
        i = rng.randrange(1, len(word) - 1)
        return word[:i] + word[i + 1:] + word[i]
    if r < 0.15:
        return word + str(rng.randrange(1000))
    return word


def prose(rng, pool, n_pieces):
    """Windows of consecutive pieces of one text (its local word order), words varied, joined
    with sentence breaks: reads like the source language, with new words and orders."""
    out = []
    count = 0
    while count < n_pieces:
        start = rng.randrange(len(pool))
        window = pool[start:start + rng.randrange(3, 16)]
        for piece in window:
            out.append(mutate_word(rng, piece) if piece[0].isalnum() else piece)
        count += len(window)
        out.append(rng.choice([" ", " ", " ", ", ", ". ", "! ", "? ", ".\n", "。", "، ", "; ", ".\n\n", "\n"]))
    return "".join(out)


def numbers(rng, n):
    parts = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            parts.append(f"{rng.randrange(10**9)}")
        elif kind == 1:
            parts.append(f"{rng.uniform(-1e4, 1e4):.{rng.randrange(1, 8)}f}")
        elif kind == 2:
            parts.append(f"20{rng.randrange(10, 30)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}")
        elif kind == 3:
            parts.append(f"https://example.org/{rng.randrange(10**6):x}/item?id={rng.randrange(10**5)}")
        else:
            parts.append(f"{{\"k{rng.randrange(100)}\": [{rng.randrange(100)}, {rng.random():.3f}]}}")
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bytes", type=int, default=TARGET_BYTES)
    args = ap.parse_args()

    rng = random.Random(SEED)
    cases = load_cases()
    sources = load_sources()
    # Word pools per reference case keep each document within one language; a shared pool
    # of everything gives the mixed-script documents.
    case_pools = [[w for w in WORD_RE.findall(text) if w] for _, text in cases]
    case_pools = [p for p in case_pools if len(p) >= 3]
    everything = [w for p in case_pools for w in p]
    source_lines = [(name, text.splitlines(keepends=True)) for name, text in sources]

    docs = []
    total = 0
    while total < args.bytes:
        kind = rng.random()
        if kind < 0.40:  # one language, reshuffled and varied
            text = prose(rng, rng.choice(case_pools), rng.randrange(200, 1500))
        elif kind < 0.55:  # scripts mixed
            text = prose(rng, everything, rng.randrange(200, 1500))
        elif kind < 0.80 and source_lines:  # a stretch of the repository's code or docs
            name, lines = rng.choice(source_lines)
            start = rng.randrange(len(lines))
            text = f"// {name}\n" + "".join(lines[start:start + rng.randrange(20, 200)])
        elif kind < 0.90:  # a chat transcript with special tokens
            turns = []
            for _ in range(rng.randrange(1, 6)):
                role = rng.choice(["user", "assistant", "system", "tool"])
                turns.append(f"<|im_start|>{role}\n{prose(rng, rng.choice(case_pools), rng.randrange(20, 200))}<|im_end|>\n")
            text = "".join(turns)
        elif kind < 0.95:  # numbers, dates, URLs, JSON
            text = numbers(rng, rng.randrange(50, 400))
        else:  # a reference case verbatim
            text = rng.choice(cases)[1]
        docs.append(text)
        total += len(text.encode("utf-8"))

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for text in docs:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"{out}: {len(docs)} documents, {total} bytes of text, sha256 {digest}")


if __name__ == "__main__":
    main()
