#!/usr/bin/env python3
"""Reference data for LoRA adapters, from Hugging Face PEFT and transformers themselves.

Writes, under tests/data/golden/<set>/:
  config.json, generation_config.json, model.safetensors   the base set's files (linked)
  adapter/adapter_config.json, adapter/adapter_model.safetensors
                              a LoRA adapter made by PEFT's get_peft_model with random A and B (PEFT
                              starts B at zero, which would test nothing) and saved by save_pretrained
  reference.json + logits     the golden sets' format (tests/data/README.md), computed by
                              PeftModel.from_pretrained on the base model, everything in float64
                              (eager attention), the adapter applied unmerged as PEFT runs it.

Not a dependency of Troupe: a test-data script. Needs torch, transformers and peft from PyPI, e.g.
  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers peft safetensors numpy
  /tmp/hf/bin/python tools/reference/lora_golden.py
"""
import json
import os
import shutil
import sys

import numpy as np
import peft
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

from rope_scaling_golden import DATA, N_NEW, forward_logits, reference_cases

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# Each set: its base, PEFT's LoraConfig arguments, the dtype the adapter is saved in, a seed.
SETS = {
    # Every projection, rank 8, alpha 16 (scaling 2), float32 tensors.
    "tiny-dense-lora": ("tiny-dense", dict(r=8, lora_alpha=16, target_modules=ALL), torch.float32, 11),
    # rsLoRA (scaling alpha / sqrt(r)), a rank_pattern (down_proj at rank 2), three projections,
    # bfloat16 tensors as adapters trained in bf16 are saved.
    "tiny-dense-lora-rs": ("tiny-dense", dict(r=4, lora_alpha=6, use_rslora=True, target_modules=["q_proj", "v_proj", "down_proj"],
                                              rank_pattern={"down_proj": 2}), torch.bfloat16, 12),
    # A mixture-of-experts model: LoRA on its attention (Troupe refuses LoRA on experts).
    "tiny-moe-lora": ("tiny-moe", dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
                      torch.float32, 13),
}


def make_adapter(base_dir, lora_args, dtype, seed, out_dir):
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora_args))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                # Large enough that the adapter changes the greedy tokens (a test that ignores it fails).
                p.copy_(torch.randn(p.shape, generator=gen) * (0.25 / p.shape[1] ** 0.5))
    model = model.to(dtype)
    adapter_dir = os.path.join(out_dir, "adapter")
    if os.path.isdir(adapter_dir):
        shutil.rmtree(adapter_dir)
    model.save_pretrained(adapter_dir, safe_serialization=True)
    os.remove(os.path.join(adapter_dir, "README.md"))  # PEFT's model-card template
    cfg_path = os.path.join(adapter_dir, "adapter_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["base_model_name_or_path"] = os.path.basename(base_dir)  # not this machine's absolute path
    cfg["target_modules"] = sorted(cfg["target_modules"])  # a set in PEFT: its order changes from run to run
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    return adapter_dir


def make_set(name, base, lora_args, dtype, seed):
    base_dir = os.path.join(DATA, "golden", base)
    out_dir = os.path.join(DATA, "golden", name)
    os.makedirs(out_dir, exist_ok=True)
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        link = os.path.join(out_dir, f)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", base, f), link)
    adapter_dir = make_adapter(base_dir, lora_args, dtype, seed, out_dir)

    # Eager experts too: the grouped-matmul ones refuse float64.
    load = dict(dtype=torch.float64, attn_implementation="eager", experts_implementation="eager")
    model = AutoModelForCausalLM.from_pretrained(base_dir, **load)
    model = PeftModel.from_pretrained(model, adapter_dir).to(torch.float64)
    model.eval()
    plain = AutoModelForCausalLM.from_pretrained(base_dir, **load).eval()

    with open(os.path.join(base_dir, "reference.json")) as f:
        base_ref = json.load(f)
    cases = reference_cases(model, base_ref, out_dir)
    for case in cases:  # the base model's greedy ids, to show that the adapter changes them
        seq, base_greedy = list(case["prompt_ids"]), []
        for _ in range(N_NEW):
            tok = int(np.argmax(forward_logits(plain, seq)[-1]))
            base_greedy.append(tok)
            seq.append(tok)
        case["greedy"]["base_model_ids"] = base_greedy
        print(f"{name} {case['id']}: greedy {case['greedy']['ids']}, without the adapter {base_greedy}", file=sys.stderr)
    ref = {
        "format_version": 1,
        "name": name,
        "model": base_ref["model"],
        "adapter": {"dir": "adapter", "lora_config": {k: v for k, v in lora_args.items()},
                    "saved_dtype": str(dtype).replace("torch.", ""), "seed": seed},
        "reference": {
            "computation": f"peft {peft.__version__} PeftModel (LoRA unmerged) on transformers {transformers.__version__} "
                           f"AutoModelForCausalLM, torch {torch.__version__}, float64 weights, adapter and activations, "
                           "eager attention; tools/reference/lora_golden.py",
            "weights": f"{base}'s model.safetensors (linked) and adapter/",
            **{k: base_ref["reference"][k] for k in ("logits_files", "prompt_logits_rows", "decode_logits_rows",
                                                     "greedy", "top2_margin")},
        },
        "cases": cases,
    }
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    for set_name, args in SETS.items():
        make_set(set_name, *args)
