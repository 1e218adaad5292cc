#!/usr/bin/env python3
"""Reference renders of chats whose final message the model continues (assistant prefill).

transformers' `apply_chat_template(..., add_generation_prompt=False, continue_final_message=True)`
renders the chat, then cuts the text after the last occurrence of the final message's content
(stripped), so the model continues that message instead of starting a new one; vLLM's
`continue_final_message` is this. This writes, for Troupe's Qwen3 tokenizer and chat template
(models/qwen3-tokenizer), the text and ids of a few such chats, and of the same chats with
add_generation_prompt=False alone, to tests/data/tokenizer/continue_final_message_cases.json.

  pip install transformers && python3 tools/reference/continue_final_message_cases.py
"""
import json
import pathlib

from transformers import AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = [
    ("prefill_json", [{"role": "user", "content": "Give me a JSON object with a name."},
                      {"role": "assistant", "content": "{\"name\": \""}], None),
    ("prefill_after_system", [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Count to five."},
                              {"role": "assistant", "content": "1, 2,"}], None),
    ("prefill_no_thinking", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}], False),
    ("prefill_trailing_space_stripped", [{"role": "user", "content": "Say yes"},
                                         {"role": "assistant", "content": "Sure, "}], None),
    ("prefill_multi_turn", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d e"}], None),
    ("final_user_message", [{"role": "user", "content": "Complete this sentence: the sky is"}], None),
]


def main():
    tok = AutoTokenizer.from_pretrained(str(ROOT / "models/qwen3-tokenizer"))
    out = []
    for name, messages, thinking in CASES:
        kw = {} if thinking is None else {"enable_thinking": thinking}
        for cont in (True, False):
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False,
                                           continue_final_message=cont, **kw)
            case = {"name": name + ("" if cont else "_closed"), "messages": messages, "continue_final_message": cont,
                    "text": text, "ids": tok.encode(text, add_special_tokens=False)}
            if thinking is not None:
                case["enable_thinking"] = thinking
            out.append(case)
    path = ROOT / "tests/data/tokenizer/continue_final_message_cases.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
