#!/usr/bin/python3
"""Example: classify texts with `troupe serve`'s POST /classify (vLLM's classification API; serve a
sequence classifier, a Qwen3ForSequenceClassification checkpoint), with nothing but Python's
standard library.

    python3 examples/python/openai_classify.py "What a lovely day" "I hated every minute"

Prints one line per text: the likeliest label, its probability, then the text.
"""
import argparse
import json
import sys
import urllib.error
import urllib.request


def classify(base_url, texts, model=None):
    """The server's data: [{"index", "label", "probs", "num_classes"}], in the texts' order."""
    body = {"input": texts}
    if model:
        body["model"] = model
    req = urllib.request.Request(base_url.rstrip("/") + "/classify", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.load(resp)["data"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("texts", nargs="+")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    args = ap.parse_args()
    try:
        data = classify(args.base_url, args.texts, args.model)
    except urllib.error.HTTPError as e:
        sys.exit(f"error {e.code}: {json.load(e)['error']['message']}")
    except urllib.error.URLError as e:
        sys.exit(f"error: {e}")
    for d, text in zip(data, args.texts):
        print(f"{d['label']}  {max(d['probs']):.4f}  {text}")


if __name__ == "__main__":
    main()
