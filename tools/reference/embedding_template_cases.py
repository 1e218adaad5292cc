#!/usr/bin/env python3
"""Reference ids for tokenizer.json post-processors (Hugging Face `tokenizers`, add_special_tokens).

Qwen3-Embedding's tokenizer.json appends <|endoftext|> to every text through a TemplateProcessing
post-processor; sentence-transformers and vLLM encode with add_special_tokens=True, so the
embedding is that token's hidden state. This writes, for Troupe's Qwen3 tokenizer
(models/qwen3-tokenizer) under each post-processor below, the ids `tokenizers` gives with
add_special_tokens=True, to tests/data/tokenizer/post_processor_cases.json.

  pip install tokenizers && python3 tools/reference/embedding_template_cases.py
"""
import json
import pathlib

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
EOT = {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}
POST_PROCESSORS = {
    # Qwen3-Embedding's: the text, then <|endoftext|>.
    "qwen3_embedding": {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
        "special_tokens": EOT,
    },
    # Tokens on both sides, one of them two ids long, inside a Sequence after ByteLevel (the shape
    # newer exports of Llama-style tokenizers take).
    "sequence_both_sides": {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<start>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {**EOT, "<start>": {"id": "<start>", "ids": [151644, 872], "tokens": ["<|im_start|>", "user"]}},
            },
        ],
    },
    # Qwen3's own: nothing added.
    "byte_level": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
}
TEXTS = ["hello world", "What is the capital of China?", "", "<|im_start|>user\nhi<|im_end|>", "数学 1+1=2"]


def main():
    base = json.loads((ROOT / "models/qwen3-tokenizer/tokenizer.json").read_text())
    out = {"source": "tokenizers " + __import__("tokenizers").__version__ + ", encode(text, add_special_tokens=True)",
           "post_processors": {}}
    for name, post in POST_PROCESSORS.items():
        base["post_processor"] = post
        tok = Tokenizer.from_str(json.dumps(base))
        out["post_processors"][name] = {
            "post_processor": post,
            "cases": [{"text": t, "ids": tok.encode(t, add_special_tokens=True).ids,
                       "plain": tok.encode(t, add_special_tokens=False).ids} for t in TEXTS],
        }
    path = ROOT / "tests/data/tokenizer/post_processor_cases.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
