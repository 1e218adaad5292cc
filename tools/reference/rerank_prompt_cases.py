#!/usr/bin/env python3
"""Reference ids for Qwen3-Reranker's prompts (Hugging Face `tokenizers`, as its model card builds them).

The model card (Qwen/Qwen3-Reranker-0.6B) encodes a fixed system prefix, then
"<Instruct>: {instruction}\\n<Query>: {query}\\n<Document>: {doc}", then a fixed assistant suffix
with an empty think block, each with add_special_tokens=False, and reads the logits of the tokens
"yes" and "no" at the last position. This writes, for Troupe's Qwen3 tokenizer
(models/qwen3-tokenizer), those ids for a few cases to tests/data/tokenizer/rerank_prompt_cases.json.

  pip install tokenizers && python3 tools/reference/rerank_prompt_cases.py
"""
import json
import pathlib

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
          "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
CASES = [
    (None, "What is the capital of China?", "The capital of China is Beijing."),
    (None, "Explain gravity",
     "Gravity is a force that attracts two bodies towards each other. It gives weight to physical objects."),
    ("Given a question, find the passage in Chinese that answers it", "天空为什么是蓝色的?",
     "瑞利散射使短波长的蓝光比红光散射得更多。"),
    ("Judge code relevance", "  leading spaces and\ttabs  ", "def f(x):\n    return x * 2  # trailing spaces   "),
]


def main():
    tok = Tokenizer.from_file(str(ROOT / "models/qwen3-tokenizer/tokenizer.json"))
    enc = lambda text: tok.encode(text, add_special_tokens=False).ids
    out = {"yes": tok.token_to_id("yes"), "no": tok.token_to_id("no"), "cases": []}
    for instruction, query, doc in CASES:
        body = "<Instruct>: {}\n<Query>: {}\n<Document>: {}".format(instruction or DEFAULT_INSTRUCTION, query, doc)
        out["cases"].append({"instruction": instruction, "query": query, "document": doc,
                             "ids": enc(PREFIX) + enc(body) + enc(SUFFIX)})
    path = ROOT / "tests/data/tokenizer/rerank_prompt_cases.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print("wrote", path, len(out["cases"]), "cases; yes", out["yes"], "no", out["no"])


if __name__ == "__main__":
    main()
