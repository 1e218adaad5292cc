#!/usr/bin/env python3
"""Writes a Hugging Face Qwen3 (dense) checkpoint as a GGUF file for llama.cpp, without torch.

Used by bench/peers/llama_cpp.sh to measure llama.cpp on the same machine and model as
troupe-bench-engine (the issues quote llama.cpp's speed on this machine kind; this measures it in
the same run). llama.cpp's own convert_hf_to_gguf.py needs torch, which these machines do not
have; this writes the same tensor names and keys (qwen3 architecture, gpt2/qwen2 tokenizer) with
gguf-py from llama.cpp's source tree and numpy. BF16/F16/F32 weights are copied as they are.

usage: hf_to_gguf.py MODEL_DIR OUT.gguf   (PYTHONPATH must contain llama.cpp's gguf-py)
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import gguf

DTYPES = {"BF16": (np.uint16, gguf.GGMLQuantizationType.BF16),
          "F16": (np.float16, gguf.GGMLQuantizationType.F16),
          "F32": (np.float32, gguf.GGMLQuantizationType.F32)}

NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
         "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
         "post_attention_layernorm": "ffn_norm"}


def safetensors_files(model: Path):
    index = model / "model.safetensors.index.json"
    if index.exists():
        return sorted({model / f for f in json.loads(index.read_text())["weight_map"].values()})
    return [model / "model.safetensors"]


def tensors(path: Path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        np_type, gg_type = DTYPES[info["dtype"]]
        lo, hi = info["data_offsets"]
        arr = np.frombuffer(data, dtype=np_type, count=(hi - lo) // np.dtype(np_type).itemsize,
                            offset=base + lo).reshape(info["shape"])
        if arr.ndim == 1:  # norms: llama.cpp adds them to f32 activations, so F32 as its converter writes
            arr = (arr.astype(np.uint32) << 16).view(np.float32) if info["dtype"] == "BF16" else arr.astype(np.float32)
            gg_type = gguf.GGMLQuantizationType.F32
        yield name, arr, gg_type


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module>.weight
    return f"blk.{parts[2]}.{NAMES['.'.join(parts[3:-1])]}.weight"


def main():
    model, out = Path(sys.argv[1]), sys.argv[2]
    cfg = json.loads((model / "config.json").read_text())
    if cfg["architectures"] != ["Qwen3ForCausalLM"]:
        sys.exit(f"{model}/config.json: only Qwen3ForCausalLM is converted")
    w = gguf.GGUFWriter(out, "qwen3")
    w.add_name(model.name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    tok = json.loads((model / "tokenizer.json").read_text())
    vocab = {**tok["model"]["vocab"], **{a["content"]: a["id"] for a in tok["added_tokens"]}}
    special = {a["id"] for a in tok["added_tokens"]}
    tokens, types = [], []
    by_id = {i: t for t, i in vocab.items()}
    for i in range(cfg["vocab_size"]):  # padded to the embedding's rows, as convert_hf_to_gguf does
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_add_bos_token(False)

    for f in safetensors_files(model):
        for name, arr, gg_type in tensors(f):
            w.add_tensor(gguf_name(name), arr, raw_shape=arr.shape, raw_dtype=gg_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
