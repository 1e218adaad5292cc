#!/usr/bin/python3
"""Example: a message from `troupe serve` through Anthropic's Messages API (POST /v1/messages),
streamed as Anthropic's server-sent events, with nothing but Python's standard library (Anthropic's
own SDK works too: docs/anthropic_api.md).

    python3 examples/python/anthropic_chat.py "Why is the sky blue?"
    python3 examples/python/anthropic_chat.py --base-url http://127.0.0.1:8000 --no-stream --max-tokens 32 "Hi"
    python3 examples/python/anthropic_chat.py --count "How many tokens is this?"

The answer goes to stdout; Qwen3's thinking (thinking blocks), when there is any, to stderr.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def post(base_url, path, body, api_key):
    headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
    if api_key:
        headers["x-api-key"] = api_key  # as Anthropic's clients send it
    req = urllib.request.Request(base_url.rstrip("/") + path, data=json.dumps(body).encode(), headers=headers)
    return urllib.request.urlopen(req)


def message(base_url, body, api_key):
    """Yields (thinking delta, text delta) pairs; the whole message at once unless streaming."""
    with post(base_url, "/v1/messages", body, api_key) as resp:
        if not body.get("stream"):
            for block in json.load(resp)["content"]:
                yield block.get("thinking", ""), block.get("text", "")
            return
        for line in resp:  # "event: TYPE" and "data: {...}" lines, blank lines between
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: "):])
            if event["type"] == "error":
                raise RuntimeError(event["error"]["message"])
            if event["type"] == "content_block_delta":
                delta = event["delta"]
                yield delta.get("thinking", ""), delta.get("text", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000")
    ap.add_argument("--api-key", default=os.environ.get("ANTHROPIC_API_KEY"), help="the server's --api-key")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--system", help="a system prompt")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--no-think", action="store_true", help='thinking: {"type": "disabled"}')
    ap.add_argument("--no-stream", action="store_true")
    ap.add_argument("--count", action="store_true", help="print the prompt's tokens (count_tokens) instead")
    args = ap.parse_args()
    body = {"messages": [{"role": "user", "content": args.prompt}]}
    if args.model:
        body["model"] = args.model
    if args.system:
        body["system"] = args.system
    if args.no_think:
        body["thinking"] = {"type": "disabled"}
    try:
        if args.count:
            with post(args.base_url, "/v1/messages/count_tokens", body, args.api_key) as resp:
                print(json.load(resp)["input_tokens"])
            return
        body.update({"max_tokens": args.max_tokens, "stream": not args.no_stream})
        if args.temperature is not None:
            body["temperature"] = args.temperature
        for thinking, text in message(args.base_url, body, args.api_key):
            sys.stderr.write(thinking)
            sys.stdout.write(text)
            sys.stdout.flush()
    except urllib.error.HTTPError as e:
        err = json.load(e).get("error", {})
        sys.exit(f"error {e.code}: {err.get('message', err)}")
    except (urllib.error.URLError, RuntimeError) as e:
        sys.exit(f"error: {e}")
    print()


if __name__ == "__main__":
    main()
