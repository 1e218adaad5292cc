#!/usr/bin/python3
"""Example: a chat completion from `troupe serve` through its OpenAI-compatible API, streamed as
server-sent events, with nothing but Python's standard library (OpenAI's own SDK works too:
docs/openai_api.md).

    python3 examples/python/openai_chat.py "Why is the sky blue?"
    python3 examples/python/openai_chat.py --base-url http://127.0.0.1:8000/v1 --no-stream --max-tokens 32 "Hi"

The answer goes to stdout; Qwen3's thinking (reasoning_content), when there is any, to stderr.
"""
import argparse
import json
import sys
import urllib.error
import urllib.request


def chat(base_url, body):
    """Yields (reasoning delta, content delta) pairs; the whole answer at once unless streaming."""
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        if not body.get("stream"):
            message = json.load(resp)["choices"][0]["message"]
            yield message.get("reasoning_content") or "", message.get("content") or ""
            return
        for line in resp:  # one "data: {...}" line per event, blank lines between
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                return
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            for choice in event["choices"]:
                delta = choice["delta"]
                yield delta.get("reasoning_content") or "", delta.get("content") or ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--no-think", action="store_true", help="chat_template_kwargs.enable_thinking = false")
    ap.add_argument("--no-stream", action="store_true")
    args = ap.parse_args()
    body = {"messages": [{"role": "user", "content": args.prompt}], "max_tokens": args.max_tokens,
            "stream": not args.no_stream}
    if args.model:
        body["model"] = args.model
    if args.temperature is not None:
        body["temperature"] = args.temperature
    if args.no_think:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    try:
        for reasoning, content in chat(args.base_url, body):
            sys.stderr.write(reasoning)
            sys.stdout.write(content)
            sys.stdout.flush()
    except urllib.error.HTTPError as e:
        sys.exit(f"error {e.code}: {json.load(e)['error']['message']}")
    except (urllib.error.URLError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    print()


if __name__ == "__main__":
    main()
