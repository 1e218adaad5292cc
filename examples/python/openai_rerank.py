#!/usr/bin/python3
"""Example: rank documents by relevance to a query with `troupe serve`'s POST /v1/rerank (vLLM's
rerank API; serve a Qwen3-Reranker checkpoint for meaningful scores), with nothing but Python's
standard library.

    python3 examples/python/openai_rerank.py "What is paged attention?" "KV blocks in a pool" "a recipe for soup"
    python3 examples/python/openai_rerank.py --top-n 1 --instruction "Find code that answers" QUERY DOC...

Prints one line per document, most relevant first: its score (P(yes) as the reranker judges it),
then the document.
"""
import argparse
import json
import sys
import urllib.error
import urllib.request


def rerank(base_url, query, documents, top_n=None, instruction=None, model=None):
    """The server's results: [{"index", "document": {"text"}, "relevance_score"}], best first."""
    body = {"query": query, "documents": documents}
    if top_n:
        body["top_n"] = top_n
    if instruction:
        body["instruction"] = instruction
    if model:
        body["model"] = model
    req = urllib.request.Request(base_url.rstrip("/") + "/rerank", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.load(resp)["results"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("query")
    ap.add_argument("documents", nargs="+")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--top-n", type=int, help="the best N documents only")
    ap.add_argument("--instruction", help="the task, as Qwen3-Reranker's <Instruct> (default: web search)")
    args = ap.parse_args()
    try:
        results = rerank(args.base_url, args.query, args.documents, args.top_n, args.instruction, args.model)
    except urllib.error.HTTPError as e:
        sys.exit(f"error {e.code}: {json.load(e)['error']['message']}")
    except urllib.error.URLError as e:
        sys.exit(f"error: {e}")
    for r in results:
        print(f"{r['relevance_score']:.4f}  {r['document']['text']}")


if __name__ == "__main__":
    main()
