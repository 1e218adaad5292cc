#!/usr/bin/env python3
"""GPTQ and AWQ checkpoints of the tiny-dense (and tiny-moe) golden sets, and the weights they stand for.

Writes tests/data/gptq/<set>/ and tests/data/awq/<set>/ for each set below:
  config.json              tiny-dense's, with a quantization_config as AutoGPTQ / GPTQModel or
                           AutoAWQ write it
  generation_config.json   tiny-dense's
  model.safetensors        the embedding table and norms as stored, every linear layer as packed
                           qweight / qzeros / scales (/ g_idx)
  reference.safetensors    each linear layer's weight as the format's own dequantisation gives it,
                           float32 under its float name ("...q_proj.weight")

GPTQ follows GPTQModel (github.com/ModelCloud/GPTQModel, gptqmodel/nn_modules/qlinear/torch.py,
PackableQuantLinear.pack / dequantize_weight, and its v2 -> v1 conversion that stores zero - 1 in
qzeros): qweight word [i // pack][o] holds input i at bit bits * (i % pack); qzeros word
[g][o // pack] holds output o at bit bits * (o % pack); w[o][i] = scale[g_idx[i]][o] *
(q - zero[g_idx[i]][o]). AWQ follows AutoAWQ's WQLinear_GEMM.from_linear (pack order
[0, 2, 4, 6, 1, 3, 5, 7]) and vLLM's awq_dequantize_torch (its inverse, [0, 4, 1, 5, 2, 6, 3, 7]):
qweight [in, out // 8], qzeros [groups, out // 8], no offset on the zero. Both formulas are
evaluated in float32, where they are exact (an 11-bit F16 scale times a code of at most 9 bits);
GPTQModel and vLLM round the product to float16. Written out in numpy so that the test data needs
no torch. The codes are round-to-nearest (GPTQ's error feedback and AWQ's activation-aware scaling
change which codes are chosen, not how they are stored). Troupe's loader is checked against these
files, not against its own packing.

Not a dependency of Troupe: a test-data script (numpy only).
  python3 tools/reference/gptq_awq_golden.py
With --from DIR --out DIR [--bits 8] [--group-size 128] [--asym | --awq] it converts any float checkpoint of
one model.safetensors the same way (no reference file), e.g. the Qwen3-0.6B-shaped one of
`troupe make-checkpoint` for the load-time benchmark (docs/benchmarks.md).
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SRC = os.path.join(ROOT, "tests", "data", "golden", "tiny-dense")
OUT = os.path.join(ROOT, "tests", "data")

SETS = {
    # Qwen's GPTQ-Int8 releases: symmetric 8-bit, groups of 128 (32 here: tiny-dense is 64 wide).
    "gptq/tiny-dense-gptq8": dict(format="gptq", bits=8, group_size=32, sym=True, g_idx=True),
    # 4-bit asymmetric with groups of 64 and no g_idx tensor (older exports leave it out).
    "gptq/tiny-dense-gptq4": dict(format="gptq", bits=4, group_size=64, sym=False, g_idx=False),
    # AutoAWQ's defaults (4-bit, zero points, GEMM), groups of 32.
    "awq/tiny-dense-awq": dict(format="awq", bits=4, group_size=32, sym=False, g_idx=False),
    # Qwen3-MoE: every expert packed, the router kept float; down_proj's 48 inputs end in a partial
    # group of 16.
    "gptq/tiny-moe-gptq4": dict(format="gptq", bits=4, group_size=32, sym=True, g_idx=True, src="tiny-moe"),
}
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]          # nibble i of a word holds output 8p + AWQ_ORDER[i]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]  # output 8p + m sits in nibble AWQ_REVERSE_ORDER[m]

DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "BF16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"]))
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dt, a = tensors[name]
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_to_f32(a):
    return (a.astype(np.uint32) << 16).view(np.float32)


def quantize(w, bits, group_size, sym):
    """Per output row and group of input columns, GPTQModel's quantizer ranges: codes in [0, maxq]."""
    out_f, in_f = w.shape
    maxq = 2**bits - 1
    groups = (in_f + group_size - 1) // group_size
    scales = np.zeros((groups, out_f), np.float16)
    zeros = np.zeros((groups, out_f), np.int64)
    q = np.zeros((in_f, out_f), np.int64)
    for g in range(groups):
        cols = slice(g * group_size, min(in_f, (g + 1) * group_size))
        x = w[:, cols].astype(np.float64)
        if sym:
            xmax = np.maximum(np.abs(x.min(1)), np.abs(x.max(1)))
            xmin = -xmax
        else:
            xmin = np.minimum(x.min(1), 0)
            xmax = np.maximum(x.max(1), 0)
        scale = (xmax - xmin) / maxq
        scale[scale == 0] = 1
        zero = np.full(out_f, (maxq + 1) // 2) if sym else np.round(-xmin / scale).astype(np.int64)
        s16 = scale.astype(np.float16)
        scales[g] = s16
        zeros[g] = zero
        codes = np.clip(np.round(x / s16.astype(np.float64)[:, None]) + zero[:, None], 0, maxq)
        q[cols] = codes.T
    return q, scales, zeros


def pack_rows(q, bits):  # [in, out] -> [in / pack, out]
    pack = 32 // bits
    words = np.zeros((q.shape[0] // pack, q.shape[1]), np.uint32)
    for j in range(pack):
        words |= (q[j::pack].astype(np.uint32) << np.uint32(bits * j))
    return words.view(np.int32)


def pack_cols(z, bits):  # [groups, out] -> [groups, out / pack]
    pack = 32 // bits
    words = np.zeros((z.shape[0], z.shape[1] // pack), np.uint32)
    for j in range(pack):
        words |= (z[:, j::pack].astype(np.uint32) << np.uint32(bits * j))
    return words.view(np.int32)


def awq_pack(v):  # [rows, out] in 0..15 -> [rows, out / 8], AutoAWQ's nibble order
    words = np.zeros((v.shape[0], v.shape[1] // 8), np.uint32)
    for i in range(8):
        words |= v[:, AWQ_ORDER[i]::8].astype(np.uint32) << np.uint32(4 * i)
    return words.view(np.int32)


def awq_unpack(words):  # vLLM's awq_dequantize_torch: unpack nibbles, then reverse the order
    w = words.view(np.uint32)
    nib = np.stack([(w >> np.uint32(4 * i)) & 15 for i in range(8)], 2).reshape(w.shape[0], -1)
    order = np.arange(nib.shape[1]).reshape(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
    return nib[:, order]


def awq_dequantize(qweight, qzeros, scales, group_size):
    q = awq_unpack(qweight).astype(np.int64)                      # [in, out]
    z = np.repeat(awq_unpack(qzeros).astype(np.int64), group_size, 0)[: q.shape[0]]
    s = np.repeat(scales.astype(np.float32), group_size, 0)[: q.shape[0]]
    return (s * (q - z).astype(np.float32)).T.copy()              # [out, in]


def dequantize(qweight, qzeros, scales, g_idx, bits):
    """GPTQModel's dequantize_weight on the v1 files: zero = stored + 1."""
    pack = 32 // bits
    maxq = 2**bits - 1
    qw = qweight.view(np.uint32)
    qz = qzeros.view(np.uint32)
    q = np.stack([(qw >> np.uint32(bits * j)) & maxq for j in range(pack)], 1).reshape(-1, qw.shape[1])
    z = np.stack([(qz >> np.uint32(bits * j)) & maxq for j in range(pack)], 2).reshape(qz.shape[0], -1) + 1
    diff = (q.astype(np.int64) - z[g_idx].astype(np.int64)).astype(np.float32)
    return (scales[g_idx].astype(np.float32) * diff).T.copy()  # [out, in]


def convert(src_dir, out_dir, p, with_reference):
    src = read_safetensors(os.path.join(src_dir, "model.safetensors"))
    with open(os.path.join(src_dir, "config.json")) as f:
        config = json.load(f)
    os.makedirs(out_dir, exist_ok=True)
    tensors, reference = {}, {}
    for tname, (dt, a) in src.items():
        linear = tname.endswith("_proj.weight")
        if not linear:
            tensors[tname] = (dt, a)
            continue
        w = bf16_to_f32(a) if dt == "BF16" else a.astype(np.float32)
        q, scales, zeros = quantize(w, p["bits"], p["group_size"], p["sym"])
        g_idx = (np.arange(w.shape[1]) // p["group_size"]).astype(np.int32)
        prefix = tname[: -len(".weight")]
        if p["format"] == "awq":
            tensors[prefix + ".qweight"] = ("I32", awq_pack(q))
            tensors[prefix + ".qzeros"] = ("I32", awq_pack(zeros))
            tensors[prefix + ".scales"] = ("F16", scales)
        else:
            tensors[prefix + ".qweight"] = ("I32", pack_rows(q, p["bits"]))
            tensors[prefix + ".qzeros"] = ("I32", pack_cols(zeros - 1, p["bits"]))  # v1: zero - 1
            tensors[prefix + ".scales"] = ("F16", scales)
            if p["g_idx"]:
                tensors[prefix + ".g_idx"] = ("I32", g_idx)
        if with_reference:
            if p["format"] == "awq":
                ref = awq_dequantize(tensors[prefix + ".qweight"][1], tensors[prefix + ".qzeros"][1], scales,
                                     p["group_size"])
            else:
                ref = dequantize(tensors[prefix + ".qweight"][1], tensors[prefix + ".qzeros"][1], scales, g_idx,
                                 p["bits"])
            # The round trip must give back the quantizer's own values.
            want = (scales[g_idx].astype(np.float32) * (q - zeros[g_idx]).astype(np.float32)).T
            assert np.array_equal(ref, want), out_dir + ": " + tname
            reference[tname] = ("F32", ref)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    if with_reference:
        write_safetensors(os.path.join(out_dir, "reference.safetensors"), reference)
    if p["format"] == "awq":
        config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": p["group_size"],
                                         "zero_point": True, "version": "gemm", "modules_to_not_convert": None}
    else:
        config["quantization_config"] = {
            "bits": p["bits"], "group_size": p["group_size"], "damp_percent": 0.01, "desc_act": False,
            "static_groups": False, "sym": p["sym"], "true_sequential": True, "model_name_or_path": None,
            "model_file_base_name": "model", "quant_method": "gptq", "checkpoint_format": "gptq",
        }
        if p["bits"] == 4:
            config["quantization_config"]["lm_head"] = False
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        if os.path.isfile(os.path.join(src_dir, name)):
            shutil.copy(os.path.join(src_dir, name), out_dir)
    print(out_dir, "written")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="src")
    ap.add_argument("--out")
    ap.add_argument("--bits", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--asym", action="store_true")
    ap.add_argument("--awq", action="store_true", help="AWQ (4-bit, zero points, GEMM layout) instead of GPTQ")
    a = ap.parse_args()
    if a.src:
        p = dict(format="awq" if a.awq else "gptq", bits=4 if a.awq else a.bits, group_size=a.group_size,
                 sym=not (a.asym or a.awq), g_idx=not a.awq)
        convert(a.src, a.out, p, False)
        return
    for name, p in SETS.items():
        src = os.path.join(os.path.dirname(SRC), p["src"]) if "src" in p else SRC
        convert(src, os.path.join(OUT, name), p, True)


if __name__ == "__main__":
    main()
