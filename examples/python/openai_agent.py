#!/usr/bin/python3
"""Example: a tool-calling agent over `troupe serve`'s Responses API (POST /v1/responses), with
nothing but Python's standard library. The model may call a calculator; each call runs here, its
result goes back as a function_call_output item beside the model's own output items (its
reasoning and calls), and the loop ends when the model answers in text (docs/openai_api.md).

    python3 examples/python/openai_agent.py "What is 17 * 23 + 4?"
    python3 examples/python/openai_agent.py --force-tool --max-tokens 64 "What is 2 ** 10?"

The answer goes to stdout; each tool call and its result to stderr.
"""
import argparse
import ast
import json
import operator
import sys
import urllib.error
import urllib.request

CALCULATOR = {
    "type": "function",
    "name": "calculator",
    "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
}

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression):
    """Arithmetic only: numbers and the operators above, nothing else is evaluated."""
    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("not arithmetic")
    try:
        return str(ev(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError) as e:
        return f"error: {e}"


def respond(base_url, body):
    req = urllib.request.Request(base_url.rstrip("/") + "/responses", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.load(resp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("question")
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="a name GET /v1/models lists (default: the served model)")
    ap.add_argument("--max-tokens", type=int, default=512, help="max_output_tokens of each turn")
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--force-tool", action="store_true", help="tool_choice 'required' on the first turn")
    ap.add_argument("--no-think", action="store_true", help="reasoning.effort 'none': Qwen3 answers without thinking")
    args = ap.parse_args()
    items = [{"role": "user", "content": args.question}]
    body = {"instructions": "Use the calculator for arithmetic.", "tools": [CALCULATOR],
            "parallel_tool_calls": False, "max_output_tokens": args.max_tokens}
    if args.model:
        body["model"] = args.model
    if args.temperature is not None:
        body["temperature"] = args.temperature
    if args.no_think:
        body["reasoning"] = {"effort": "none"}
    try:
        for turn in range(args.max_turns):
            body["input"] = items
            body["tool_choice"] = "required" if args.force_tool and turn == 0 else "auto"
            response = respond(args.base_url, body)
            calls = [o for o in response["output"] if o["type"] == "function_call"]
            if not calls:
                text = "".join(p["text"] for o in response["output"] if o["type"] == "message" for p in o["content"])
                print(text)
                return
            # The model's output items go back as they came (its reasoning too), each call's result after them.
            items += response["output"]
            for call in calls:
                try:
                    expression = json.loads(call["arguments"]).get("expression", "")
                except (json.JSONDecodeError, AttributeError):
                    expression = ""
                result = calculate(str(expression))
                sys.stderr.write(f"[tool] calculator({call['arguments']}) -> {result}\n")
                items.append({"type": "function_call_output", "call_id": call["call_id"], "output": result})
        sys.exit(f"no answer after {args.max_turns} turns")
    except urllib.error.HTTPError as e:
        sys.exit(f"error {e.code}: {json.load(e)['error']['message']}")
    except urllib.error.URLError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
