#!/usr/bin/env python3
"""A model and a draft model that agree, from one random-weight checkpoint, to measure what
speculative decoding with a draft model (--speculative-model) costs and gains when the draft
guesses right. Random weights make any two different models disagree on nearly every token, so
the pair is built: the model keeps every layer's weights but the output projections (o_proj,
down_proj) of layers LAYERS and up are zero, so those layers add exactly nothing to the residual
stream; the draft is the same checkpoint cut to its first LAYERS layers. Both then compute the
same final hidden state bit for bit, and the draft's greedy guesses are the model's greedy tokens.
The model still reads all its weights per token (zeros cost what other bytes cost), so its speed
is the original's; the draft reads the embeddings, LAYERS layers and the lm_head.

    troupe make-checkpoint --out /tmp/q06b --preset qwen3-0.6b
    python3 bench/serving/make_agreeing_draft.py --model /tmp/q06b --layers 2 \
        --out-model /tmp/q06b-agree --out-draft /tmp/q06b-draft2

Only the standard library: safetensors is an 8-byte header length, a JSON header, then the data.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys

LAYER = re.compile(r"^model\.layers\.(\d+)\.")
ZEROED = (".self_attn.o_proj.weight", ".mlp.down_proj.weight")


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def write_safetensors(src, header, data_start, out, keep, zero):
    """Copies the tensors `keep` selects from src to out, the ones `zero` selects as zero bytes."""
    names = [k for k in header if k != "__metadata__" and keep(k)]
    names.sort(key=lambda k: header[k]["data_offsets"][0])
    new_header, offset = {}, 0
    if "__metadata__" in header:
        new_header["__metadata__"] = header["__metadata__"]
    for k in names:
        a, b = header[k]["data_offsets"]
        new_header[k] = dict(header[k], data_offsets=[offset, offset + (b - a)])
        offset += b - a
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(src, "rb") as f, open(out, "wb") as g:
        g.write(struct.pack("<Q", len(text)))
        g.write(text)
        for k in names:
            a, b = header[k]["data_offsets"]
            if zero(k):
                g.write(bytes(b - a))
            else:
                f.seek(data_start + a)
                g.write(f.read(b - a))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a single-file checkpoint directory (troupe make-checkpoint)")
    ap.add_argument("--layers", type=int, default=2, help="layers the draft keeps (and the model's layers that act)")
    ap.add_argument("--out-model", required=True)
    ap.add_argument("--out-draft", required=True)
    a = ap.parse_args()
    src = os.path.join(a.model, "model.safetensors")
    if not os.path.exists(src):
        sys.exit(f"{src}: expected one model.safetensors (a sharded checkpoint is not handled here)")
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    if not 0 < a.layers < config["num_hidden_layers"]:
        sys.exit(f"--layers must be between 1 and {config['num_hidden_layers'] - 1}")
    header, data_start = read_header(src)

    def layer_of(k):
        m = LAYER.match(k)
        return int(m.group(1)) if m else -1

    for out, cfg_layers, keep, zero in (
        (a.out_model, config["num_hidden_layers"], lambda k: True,
         lambda k: layer_of(k) >= a.layers and k.endswith(ZEROED)),
        (a.out_draft, a.layers, lambda k: layer_of(k) < a.layers, lambda k: False),
    ):
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(a.model):
            if name not in ("model.safetensors", "config.json") and os.path.isfile(os.path.join(a.model, name)):
                shutil.copy(os.path.join(a.model, name), os.path.join(out, name))
        c = dict(config, num_hidden_layers=cfg_layers)
        if "layer_types" in c:
            c["layer_types"] = c["layer_types"][:cfg_layers]
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        write_safetensors(src, header, data_start, os.path.join(out, "model.safetensors"), keep, zero)
        print(f"wrote {out} ({cfg_layers} layers)")


if __name__ == "__main__":
    main()
