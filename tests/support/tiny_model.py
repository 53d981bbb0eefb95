"""A tiny random-weight Llama model folder in Hugging Face's format, written by hand (no transformers needed).

config.json (LlamaForCausalLM, 2 layers, hidden 32), model.safetensors (the safetensors layout: an 8-byte header
length, a JSON header, raw little-endian tensors), a word-level tokenizer.json and tokenizer_config.json. The
image's transformers loads it and generates from it on the CPU; a ROCm host's ATOM could load the same folder.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "red", "blue", "big", "small", "and",
         "then", "slowly", "quickly", "home", "park", "sun", "moon", "jumped", "slept", "capital", "of", "france",
         "is", "paris", "city"]
SPECIAL = ["<unk>", "<s>", "</s>"]


def make_tiny_model(path: Path, hidden: int = 32, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    import torch

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = SPECIAL + WORDS
    inter = hidden * 2
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden, "intermediate_size": inter,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": heads,
        "vocab_size": len(vocab), "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "torch_dtype": "float32",
        "hidden_act": "silu",
    }
    (path / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}) + "\n")
    generator = torch.Generator().manual_seed(seed)
    tensors = _weights(config, generator)
    _write_safetensors(path / "model.safetensors", tensors)
    _write_tokenizer(path, vocab)
    return path


def _weights(cfg: dict, g) -> dict:
    import torch

    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.2).float()

    out = {"model.embed_tokens.weight": rand(v, h), "model.norm.weight": torch.ones(h), "lm_head.weight": rand(v, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({p + "self_attn.q_proj.weight": rand(h, h), p + "self_attn.k_proj.weight": rand(h, h),
                    p + "self_attn.v_proj.weight": rand(h, h), p + "self_attn.o_proj.weight": rand(h, h),
                    p + "mlp.gate_proj.weight": rand(inter, h), p + "mlp.up_proj.weight": rand(inter, h),
                    p + "mlp.down_proj.weight": rand(h, inter), p + "input_layernorm.weight": torch.ones(h),
                    p + "post_attention_layernorm.weight": torch.ones(h)})
    return out


def _write_safetensors(file: Path, tensors: dict) -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    file.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def _write_tokenizer(path: Path, vocab: list[str]) -> None:
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(SPECIAL)],
        "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(vocab)}, "unk_token": "<unk>"},
    }
    (path / "tokenizer.json").write_text(json.dumps(tokenizer, indent=1) + "\n")
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": 128}, indent=1) + "\n")
