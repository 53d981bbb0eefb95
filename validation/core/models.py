"""GEMM shapes of a model per tensor-parallel size, from a Hugging Face config.json or a preset.

Presets are written by hand in config.json's own keys, so presets and real configs share one path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PRESETS: dict[str, dict] = {
    # Llama-3-8B: GQA 32/8 heads, SwiGLU MLP.
    "llama3-8b": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    },
    # Qwen3-30B-A3B: 128 experts, top-8, expert FFN 768; the dense GEMMs are attention and the router.
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4,
        "head_dim": 128, "vocab_size": 151936, "num_experts": 128, "num_experts_per_tok": 8,
        "moe_intermediate_size": 768, "intermediate_size": 6144,
    },
    # DeepSeek-V3: MLA (q/kv LoRA ranks 1536/512, rope 64, nope 128, v 128), 256 experts + 1 shared; its checkpoint's
    # fp8 block-scale quantization (config.json's quantization_config, as published).
    "deepseek-v3": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "vocab_size": 129280,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
    },
}

BF16, FP8, FP8_BLOCK = "bf16", "fp8", "fp8-blockscale"
M_BUCKETS = tuple(2**i for i in range(14))  # 1 .. 8192 tokens
_JSON_KINDS = {list: "JSON array", str: "JSON string", int: "JSON number", float: "JSON number",
               bool: "JSON boolean", type(None): "JSON null"}


@dataclass(frozen=True, order=True)
class GemmShape:
    layer: str
    N: int
    K: int


def load_config(spec: str) -> tuple[str, dict]:
    """A preset name or a path to config.json (or to a folder holding one)."""
    if spec in PRESETS:
        return spec, PRESETS[spec]
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ValueError(f"--model {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"--model {path}: not a readable JSON file ({e})") from None
    if not isinstance(cfg, dict):
        kind = _JSON_KINDS.get(type(cfg), type(cfg).__name__)
        raise ValueError(f"--model {path}: a Hugging Face config.json is a JSON object, this one is a {kind}")
    return cfg.get("_name_or_path") or path.parent.name or str(path), cfg


def quantization(cfg: dict) -> str:
    """The checkpoint's linear weights: bf16, fp8 (per-token/per-tensor scales) or fp8 with block scales."""
    q = cfg.get("quantization_config") or {}
    if str(q.get("quant_method", "")).lower() != "fp8":
        return BF16
    return FP8_BLOCK if q.get("weight_block_size") else FP8


def _split(n: int, tp: int, what: str) -> int:
    if n % tp:
        raise ValueError(f"{what}={n} is not divisible by tp={tp}")
    return n // tp


def gemm_shapes(cfg: dict, tp: int) -> list[GemmShape]:
    """Linear layers as (N, K) per rank: column-parallel splits N, row-parallel splits K."""
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    shapes = [GemmShape("lm_head", _split(cfg["vocab_size"], tp, "vocab_size"), h)]
    if "kv_lora_rank" in cfg:
        shapes += _mla_shapes(cfg, tp)
    else:
        kv = cfg.get("num_key_value_heads", heads)
        hd = cfg.get("head_dim") or h // heads
        # KV heads are replicated when tp exceeds them, as vLLM/ATOM do.
        kv_rank = max(1, kv // tp)
        shapes += [GemmShape("qkv_proj", (_split(heads, tp, "heads") + 2 * kv_rank) * hd, h),
                   GemmShape("o_proj", h, _split(heads * hd, tp, "heads*head_dim"))]
    experts = cfg.get("num_experts") or cfg.get("n_routed_experts")
    if experts:
        shapes.append(GemmShape("router", experts, h))  # replicated, never split
        shared = cfg.get("n_shared_experts") or 0
        if shared:
            inter = cfg["moe_intermediate_size"] * shared
            shapes += _mlp("shared_expert", h, inter, tp)
        if cfg.get("model_type", "").startswith("deepseek"):
            shapes += _mlp("dense_mlp", h, cfg["intermediate_size"], tp)  # the first dense layers
    else:
        shapes += _mlp("mlp", h, cfg["intermediate_size"], tp)
    return sorted(set(shapes))


@dataclass(frozen=True)
class ExpertShape:
    experts: int
    top_k: int
    hidden: int
    inter: int  # one expert's FFN width on one rank (the experts' tensor-parallel split)


def expert_shape(cfg: dict, tp: int) -> ExpertShape | None:
    """The routed-expert layer per rank, or None for a dense model."""
    experts = cfg.get("num_experts") or cfg.get("n_routed_experts")
    if not experts:
        return None
    return ExpertShape(experts, cfg.get("num_experts_per_tok", 1), cfg["hidden_size"],
                       _split(cfg["moe_intermediate_size"], tp, "moe_intermediate_size"))


def _mlp(name: str, h: int, inter: int, tp: int) -> list[GemmShape]:
    per_rank = _split(inter, tp, f"{name} intermediate")
    return [GemmShape(f"{name}.gate_up", 2 * per_rank, h), GemmShape(f"{name}.down", h, per_rank)]


def _mla_shapes(cfg: dict, tp: int) -> list[GemmShape]:
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    rope, nope, v = cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    q_rank, kv_rank = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    local = _split(heads, tp, "heads")
    return [
        GemmShape("fused_qkv_a_proj", q_rank + kv_rank + rope, h),  # replicated
        GemmShape("q_b_proj", local * (nope + rope), q_rank),
        GemmShape("kv_b_proj", local * (nope + v), kv_rank),
        GemmShape("o_proj", h, local * v),
    ]
