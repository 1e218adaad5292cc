#!/usr/bin/python3
"""Example: stream a completion from `troupe serve`.

    python3 examples/python/generate.py --port 7711 "Once upon a time"
    python3 examples/python/generate.py --ids 1,2,3 --max-tokens 8 --temperature 0
"""
import argparse
import sys

from troupe_client import Client, TroupeError


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt", nargs="?", help="prompt text (needs a model with a tokenizer)")
    ap.add_argument("--ids", help="prompt as comma-separated token ids instead")
    ap.add_argument("--chat", action="store_true", help="send the prompt as one user chat message")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7711)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--seed", type=int)
    args = ap.parse_args()
    fields = {"max_tokens": args.max_tokens}
    if args.temperature is not None:
        fields["temperature"] = args.temperature
    if args.seed is not None:
        fields["seed"] = args.seed
    with Client(args.host, args.port) as c:
        model = c.models()[0]
        print(f"[{model['name']}, max_model_len {model['max_model_len']}]", file=sys.stderr)
        try:
            if args.ids:
                events = c.generate(prompt_ids=[int(x) for x in args.ids.split(",")], **fields)
            elif args.chat:
                events = c.generate(messages=[{"role": "user", "content": args.prompt}], **fields)
            else:
                events = c.generate(prompt=args.prompt, **fields)
            for ev in events:
                if ev["event"] == "token":
                    print(ev["text"] or (" ".join(map(str, ev["ids"])) + " " if args.ids else ""), end="", flush=True)
                else:
                    print()
                    u, t = ev["usage"], ev["timings"]
                    print(f"[{ev['finish_reason']}: {u['prompt_tokens']} prompt "
                          f"({u.get('cached_prompt_tokens', 0)} cached) + {u['completion_tokens']} "
                          f"completion tokens, ttft {t['ttft_ms']:.1f} ms, total {t['total_ms']:.1f} ms]",
                          file=sys.stderr)
        except TroupeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
