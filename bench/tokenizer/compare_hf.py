#!/usr/bin/env python3
"""Differential check of Troupe's tokenizer against the reference implementations, on random
input the test data does not cover: `troupe tokenize` vs Hugging Face `tokenizers` on random
strings over wide Unicode ranges (U+0085, U+FEFF, controls, private use, astral planes, added
tokens, contraction and white-space edge cases); `troupe detokenize` vs `tokenizers` decode on
random id sequences (broken UTF-8, special tokens, with and without skip_special_tokens);
`troupe chat-template` vs Python Jinja2 set up as transformers does, on random conversations.

    .venv/bin/pip install tokenizers jinja2
    .venv/bin/python bench/tokenizer/compare_hf.py --troupe build/tools/troupe/troupe [--seed 1]

Exits 1 on any difference and prints the first few.
"""
import argparse
import json
import pathlib
import random
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

RANGES = [(0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x17F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
          (0x2100, 0x214F), (0x3000, 0x303F), (0x3040, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80),
          (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1D400, 0x1D7FF), (0x10000, 0x1007F), (0x85, 0x85),
          (0xFEFF, 0xFEFF), (0x180E, 0x180E), (0x200B, 0x200D), (0x2028, 0x2029), (0xE000, 0xE010),
          (0xFFF0, 0xFFFD), (0x00, 0x1F), (0x17F, 0x17F)]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "<tool_call>", "'s", "'LL", "'Re",
            "  ", "\n\n", "\r\n", " \n ", "<|im_start|", "<|IM_END|>"]


def run(troupe, command, model, lines, extra=()):
    out = subprocess.run([troupe, command, "--model", model, *extra], input="".join(l + "\n" for l in lines),
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"troupe {command} failed: {out.stderr[:500]}")
    # JSON lines are split on "\n" only: str.splitlines() would also split at raw U+0085 / U+2028.
    return out.stdout.split("\n")[:-1]


def random_text(rnd):
    parts = []
    for _ in range(rnd.randrange(1, 40)):
        if rnd.random() < 0.08:
            parts.append(rnd.choice(SPECIALS))
            continue
        a, b = rnd.choice(RANGES)
        cp = rnd.randrange(a, b + 1)
        parts.append(chr(cp) * (1 if rnd.random() < 0.8 else rnd.randrange(2, 6)))
    return "".join(parts)


def check_encode(args, rnd, hf, report):
    texts = [random_text(rnd) for _ in range(args.n)]
    got = run(args.troupe, "tokenize", args.model, [json.dumps(t) for t in texts])
    for t, line in zip(texts, got):
        ref = hf.encode(t, add_special_tokens=False).ids
        if json.loads(line)["ids"] != ref:
            report("encode", repr(t), json.loads(line)["ids"], ref)
    return len(texts)


def check_decode(args, rnd, hf, report):
    seqs = []
    for _ in range(args.n // 4):
        seq = []
        for _ in range(rnd.randrange(0, 30)):
            r = rnd.random()
            seq.append(rnd.randrange(151643, 151669) if r < 0.1 else rnd.randrange(0, 300) if r < 0.4
                       else rnd.randrange(0, 151643))
        seqs.append(seq)
    for skip in (False, True):
        got = run(args.troupe, "detokenize", args.model, [json.dumps(s) for s in seqs],
                  ["--skip-special-tokens"] if skip else [])
        for s, line in zip(seqs, got):
            ref = hf.decode(s, skip_special_tokens=skip)
            if json.loads(line) != ref:
                report(f"decode skip={skip}", s, json.loads(line), ref)
    return 2 * len(seqs)


def check_chat(args, rnd, report):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    cfg = json.load(open(pathlib.Path(args.model) / "tokenizer_config.json", encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(cfg["chat_template"])
    words = ["hi", "Zürich", "日本", "<think>", "</think>", "\n", "\n\n", "  ", "x", '"q"', "<tool_response>",
             "</tool_response>", '{"a": 1}', "😀"]
    tools = [{"type": "function", "function": {"name": "f", "description": "d",
                                               "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}},
             {"type": "function", "function": {"name": "g", "parameters": {}}}]

    def text():
        return "".join(rnd.choice(words) for _ in range(rnd.randrange(0, 8)))

    reqs = []
    for _ in range(args.n // 8):
        msgs = []
        for _ in range(rnd.randrange(1, 7)):
            role = rnd.choice(["user", "assistant", "system", "tool", "user"])
            m = {"role": role, "content": text()}
            if role == "assistant" and rnd.random() < 0.3:
                m["reasoning_content"] = text()
            if role == "assistant" and rnd.random() < 0.3:
                calls = []
                for _ in range(rnd.randrange(1, 3)):
                    arguments = {"x": rnd.random(), "s": text()} if rnd.random() < 0.5 else json.dumps({"k": text()})
                    call = {"name": rnd.choice(["f", "g"]), "arguments": arguments}
                    calls.append({"type": "function", "function": call} if rnd.random() < 0.5 else call)
                m["tool_calls"] = calls
            msgs.append(m)
        req = {"messages": msgs}
        if rnd.random() < 0.3:
            req["tools"] = rnd.sample(tools, rnd.randrange(1, 3))
        if rnd.random() < 0.7:
            req["add_generation_prompt"] = rnd.random() < 0.5
        if rnd.random() < 0.5:
            req["enable_thinking"] = rnd.random() < 0.5
        reqs.append(req)
    got = run(args.troupe, "chat-template", args.model, [json.dumps(r) for r in reqs])
    for r, line in zip(reqs, got):
        kwargs = {k: v for k, v in r.items() if k == "enable_thinking"}
        ref = template.render(messages=r["messages"], tools=r.get("tools"),
                              add_generation_prompt=r.get("add_generation_prompt", False),
                              eos_token=cfg["eos_token"], pad_token=cfg["pad_token"], **kwargs)
        if json.loads(line)["text"] != ref:
            report("chat-template", json.dumps(r)[:300], json.loads(line)["text"][:300], ref[:300])
    return len(reqs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True, help="path of the troupe binary")
    ap.add_argument("--model", default=str(ROOT / "models/qwen3-tokenizer"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=20000, help="random strings to encode (others scale from it)")
    args = ap.parse_args()

    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(str(pathlib.Path(args.model) / "tokenizer.json"))
    rnd = random.Random(args.seed)
    failures = []

    def report(kind, inp, ours, ref):
        failures.append(kind)
        if len(failures) <= 5:
            print(f"DIFFERENT ({kind}): input {inp}\n  troupe: {ours!r}\n  reference: {ref!r}")

    n_enc = check_encode(args, rnd, hf, report)
    n_dec = check_decode(args, rnd, hf, report)
    n_chat = check_chat(args, rnd, report)
    print(f"encode: {n_enc} strings, decode: {n_dec} id sequences, chat template: {n_chat} conversations; "
          f"differences: {len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
