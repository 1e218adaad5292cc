#!/usr/bin/python3
"""Example: a background response from `troupe serve` (the Responses API's `background: true`),
with nothing but Python's standard library. The server answers at once with the response queued
and runs it with no connection tied to it; this script then polls it until it ends, or, with
--stream, reads its events, drops the connection after a few of them (as a flaky network would)
and resumes from the last one it saw (GET /v1/responses/{id}?stream=true&starting_after=N), or,
with --cancel, cancels it (docs/openai_api.md, "Background responses").

    python3 examples/python/openai_background.py "Write a long story."
    python3 examples/python/openai_background.py --stream --drop-after 5 "Write a long story."
    python3 examples/python/openai_background.py --cancel "Write a long story."

The answer's text goes to stdout; the response's id, status and any reconnection to stderr.
"""
import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def call(url, body=None, method=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req)


def events(resp):
    """The JSON of each server-sent event of a response stream, in order."""
    for line in resp:
        line = line.decode()
        if line.startswith("data: "):
            yield json.loads(line[6:])


def output_text(response):
    return "".join(part.get("text", "") for item in response.get("output", []) if item.get("type") == "message"
                   for part in item.get("content", []))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--max-tokens", type=int, default=256, help="max_output_tokens")
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--poll", type=float, default=0.2, help="seconds between two polls")
    ap.add_argument("--stream", action="store_true", help="read its events instead of polling")
    ap.add_argument("--drop-after", type=int, default=0,
                    help="with --stream: leave after this many events, then resume from the last one seen")
    ap.add_argument("--cancel", action="store_true", help="cancel it right after it is queued")
    args = ap.parse_args()
    base = args.base_url.rstrip("/")
    body = {"input": args.prompt, "background": True, "max_output_tokens": args.max_tokens}
    if args.model:
        body["model"] = args.model
    if args.temperature is not None:
        body["temperature"] = args.temperature
    try:
        if args.stream:
            body["stream"] = True
            text, last, rid, final = "", -1, None, None
            with call(base + "/responses", body) as resp:
                for n, ev in enumerate(events(resp), 1):
                    last = ev["sequence_number"]
                    rid = rid or ev.get("response", {}).get("id")
                    text += ev.get("delta", "") if ev["type"] == "response.output_text.delta" else ""
                    final = ev.get("response") if ev["type"] in ("response.completed", "response.failed") else final
                    if args.drop_after and n >= args.drop_after and not final:
                        break  # the connection goes; the response runs on
            if not final:
                print(f"[reconnect] {rid} after event {last}", file=sys.stderr)
                with call(f"{base}/responses/{rid}?stream=true&starting_after={last}") as resp:
                    for ev in events(resp):
                        text += ev.get("delta", "") if ev["type"] == "response.output_text.delta" else ""
                        if ev["type"] in ("response.completed", "response.failed"):
                            final = ev["response"]
            print(f"[{final['status']}] {rid}", file=sys.stderr)
            print(text)
            return 0 if final["status"] != "failed" else 1
        with call(base + "/responses", body) as resp:
            r = json.load(resp)
        print(f"[{r['status']}] {r['id']}", file=sys.stderr)
        if args.cancel:
            with call(f"{base}/responses/{r['id']}/cancel", {}) as resp:
                r = json.load(resp)
        while r["status"] in ("queued", "in_progress"):
            time.sleep(args.poll)
            with call(f"{base}/responses/{r['id']}") as resp:
                r = json.load(resp)
        print(f"[{r['status']}] {r['id']}", file=sys.stderr)
        if r.get("error"):
            print(f"error: {r['error']['message']}", file=sys.stderr)
        print(output_text(r))
        return 0 if r["status"] != "failed" else 1
    except urllib.error.HTTPError as e:
        print(f"error: HTTP {e.code}: {json.load(e).get('error', {}).get('message', '')}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
