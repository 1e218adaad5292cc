#!/usr/bin/env python3
"""Reference data for RoPE scaling (YaRN, linear) from Hugging Face transformers itself.

Writes, under tests/data/:
  golden/tiny-dense-<type>/   the tiny-dense weights (linked) with config.json's rope_scaling set, and
                              reference.json + logits in the golden sets' format (tests/data/README.md),
                              computed by transformers' Qwen3ForCausalLM in float64 (eager attention);
  rope/hf_rope_frequencies.json  inv_freq and attention factor from transformers' ROPE_INIT_FUNCTIONS
                              for Qwen3-0.6B's YaRN setting and variants of every YaRN field.

Not a dependency of Troupe: a test-data script. Needs torch and transformers from PyPI, e.g.
  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers safetensors numpy
  /tmp/hf/bin/python tools/reference/rope_scaling_golden.py
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
BASE = os.path.join(DATA, "golden", "tiny-dense")

# Each set: the rope_scaling written into config.json, and the context it allows.
SETS = {
    # original 64, factor 4: head_dim 32 at theta 1e6 puts the YaRN ramp on pairs 0..3, so pairs are
    # extrapolated, blended and interpolated; the attention factor is 0.1 ln 4 + 1.
    "tiny-dense-yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}, 256),
    "tiny-dense-linear": ({"rope_type": "linear", "factor": 2.0}, 128),
}
N_NEW = 8


def forward_logits(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float64).numpy()


def margin(row):
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def reference_cases(model, base_ref, out_dir):
    """p2 and p3 of the base set through `model`: prompt logits (every position of p2; every 8th
    and the last of p3) and N_NEW greedy steps with their logits, written beside reference.json;
    returns the cases' entries."""
    cases = []
    for case in base_ref["cases"]:
        if case["id"] not in ("p2", "p3"):
            continue
        ids = case["prompt_ids"]
        prompt = forward_logits(model, ids)
        # p3 (200 tokens): every 8th position and the last keep the files small.
        positions = list(range(len(ids))) if len(ids) < 64 else sorted(set(range(0, len(ids), 8)) | {len(ids) - 1})
        pfile = f"{case['id']}.prompt_logits.f32"
        prompt[positions].astype("<f4").tofile(os.path.join(out_dir, pfile))
        seq, greedy, margins, rows = list(ids), [], [], []
        for _ in range(N_NEW):
            row = forward_logits(model, seq)[-1]
            tok = int(np.argmax(row))
            greedy.append(tok)
            margins.append(margin(row))
            rows.append(row)
            seq.append(tok)
        dfile = f"{case['id']}.decode_logits.f32"
        np.stack(rows).astype("<f4").tofile(os.path.join(out_dir, dfile))
        cases.append({
            "id": case["id"],
            "prompt_len": len(ids),
            "prompt_ids": ids,
            "prompt_logits": {"file": pfile, "dtype": "float32", "shape": [len(positions), prompt.shape[1]],
                              "positions": positions},
            "prompt_top2_margin": [margin(r) for r in prompt],
            "greedy": {"n_new": N_NEW, "ids": greedy, "eos_ignored": True, "top2_margin": margins,
                       "logits": {"file": dfile, "dtype": "float32", "shape": [N_NEW, prompt.shape[1]],
                                  "steps": list(range(N_NEW))}},
        })
    return cases


def make_set(name, rope_scaling, max_pos):
    out_dir = os.path.join(DATA, "golden", name)
    os.makedirs(out_dir, exist_ok=True)
    for f in ("model.safetensors", "generation_config.json"):
        link = os.path.join(out_dir, f)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", "tiny-dense", f), link)
    with open(os.path.join(BASE, "config.json")) as f:
        config = json.load(f)
    config["rope_scaling"] = rope_scaling
    config["max_position_embeddings"] = max_pos
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")

    model = Qwen3ForCausalLM.from_pretrained(out_dir, dtype=torch.float64, attn_implementation="eager")
    model.eval()
    rot = model.model.rotary_emb
    print(f"{name}: rope_type {rot.rope_type}, attention_scaling {rot.attention_scaling}", file=sys.stderr)
    assert rot.rope_type == rope_scaling["rope_type"], "transformers did not take the rope_scaling"

    with open(os.path.join(BASE, "reference.json")) as f:
        base_ref = json.load(f)
    cases = reference_cases(model, base_ref, out_dir)
    ref = {
        "format_version": 1,
        "name": name,
        "model": dict(base_ref["model"], rope_scaling=rope_scaling, max_position_embeddings=max_pos),
        "reference": {
            "computation": f"transformers {transformers.__version__} Qwen3ForCausalLM, torch {torch.__version__}, "
                           "float64 weights and activations, eager attention (RoPE cos/sin in float32, as "
                           "transformers computes them); tools/reference/rope_scaling_golden.py",
            "weights": "tiny-dense's model.safetensors (linked)",
            **{k: base_ref["reference"][k] for k in ("logits_files", "prompt_logits_rows", "decode_logits_rows",
                                                     "greedy", "top2_margin")},
        },
        "cases": cases,
    }
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


def frequency_cases():
    qwen3 = dict(head_dim=128, rope_theta=1e6, max_position_embeddings=40960, hidden_size=1024,
                 num_attention_heads=16)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    variants = [
        ("qwen3-0.6b yarn x4 (Qwen's model card)", qwen3, yarn),
        ("yarn without original_max_position_embeddings", qwen3, {"rope_type": "yarn", "factor": 2.0}),
        ("yarn attention_factor given", qwen3, dict(yarn, attention_factor=1.5)),
        ("yarn mscale and mscale_all_dim", qwen3, dict(yarn, mscale=0.707, mscale_all_dim=1.0)),
        ("yarn beta_fast 16, beta_slow 2", qwen3, dict(yarn, beta_fast=16.0, beta_slow=2.0)),
        ("yarn truncate false", qwen3, dict(yarn, truncate=False)),
        ("yarn factor 8, head_dim 64, theta 1e4", dict(qwen3, head_dim=64, rope_theta=1e4),
         {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}),
        ("linear x2", qwen3, {"rope_type": "linear", "factor": 2.0}),
        ("default", qwen3, None),
    ]
    out = []
    for name, shape, scaling in variants:
        cfg = Qwen3Config(num_hidden_layers=1, rope_scaling=scaling, **shape)
        kind = scaling["rope_type"] if scaling else "default"
        inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu") if kind != "default" else \
            (1.0 / (shape["rope_theta"] ** (torch.arange(0, shape["head_dim"], 2, dtype=torch.float) / shape["head_dim"])), 1.0)
        config = dict(shape, architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=1024,
                      num_hidden_layers=1, num_key_value_heads=8, intermediate_size=3072, rope_scaling=scaling)
        out.append({"name": name, "config": config, "inv_freq": [float(x) for x in inv_freq.to(torch.float32)],
                    "attention_factor": float(attention_factor)})
    os.makedirs(os.path.join(DATA, "rope"), exist_ok=True)
    with open(os.path.join(DATA, "rope", "hf_rope_frequencies.json"), "w") as f:
        json.dump({"source": f"transformers {transformers.__version__} modeling_rope_utils.ROPE_INIT_FUNCTIONS "
                             "(float32); tools/reference/rope_scaling_golden.py", "cases": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    for set_name, (scaling, max_pos) in SETS.items():
        make_set(set_name, scaling, max_pos)
    frequency_cases()
