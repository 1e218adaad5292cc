#!/usr/bin/python3
"""Example: rank texts by similarity to a query with `troupe serve`'s POST /v1/embeddings, with
nothing but Python's standard library (OpenAI's own SDK works too: docs/openai_api.md). The
vectors come back base64-encoded float32 (encoding_format "base64", what OpenAI's SDK asks for) and
unit length, so a dot product is the cosine similarity.

    python3 examples/python/openai_embeddings.py "paged attention" "KV blocks in a pool" "a recipe for soup"
    python3 examples/python/openai_embeddings.py --dimensions 256 --instruct "Find related passages" QUERY TEXT...

Prints one line per text, most similar first: the similarity, then the text.
"""
import argparse
import base64
import json
import struct
import sys
import urllib.error
import urllib.request


def embed(base_url, texts, model=None, dimensions=None):
    """The embedding of each text, in order."""
    body = {"input": texts, "encoding_format": "base64"}
    if model:
        body["model"] = model
    if dimensions:
        body["dimensions"] = dimensions
    req = urllib.request.Request(base_url.rstrip("/") + "/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        data = sorted(json.load(resp)["data"], key=lambda d: d["index"])
    out = []
    for d in data:
        raw = base64.b64decode(d["embedding"])
        out.append(list(struct.unpack("<%df" % (len(raw) // 4), raw)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("query")
    ap.add_argument("texts", nargs="+")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--dimensions", type=int, help="keep the first N values (Matryoshka models)")
    ap.add_argument("--instruct", help="Qwen3-Embedding's query instruction: 'Instruct: TASK\\nQuery:QUERY'")
    args = ap.parse_args()
    query = f"Instruct: {args.instruct}\nQuery:{args.query}" if args.instruct else args.query
    try:
        vectors = embed(args.base_url, [query] + args.texts, args.model, args.dimensions)
    except urllib.error.HTTPError as e:
        sys.exit(f"error {e.code}: {json.load(e)['error']['message']}")
    except urllib.error.URLError as e:
        sys.exit(f"error: {e}")
    q = vectors[0]
    scored = sorted(((sum(a * b for a, b in zip(q, v)), t) for v, t in zip(vectors[1:], args.texts)), reverse=True)
    for score, text in scored:
        print(f"{score:.4f}  {text}")


if __name__ == "__main__":
    main()
