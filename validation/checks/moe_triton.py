"""Triton fused MoE: aiter's where it can run (validation.checks.aiter_moe_cases), and always ours, against a
per-expert torch loop (ATOM's CK-free expert layer on the same inputs: validation.checks.atom_reroutes)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from validation.checks import aiter_moe_cases
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult
from validation.core.device import interpreting

NAME = "moe-triton"


@dataclass(frozen=True)
class MoeShape:
    name: str
    T: int  # tokens
    H: int  # hidden
    inter: int  # expert FFN width
    E: int
    top_k: int

    @property
    def label(self) -> str:
        return f"{self.name}[T={self.T},H={self.H},I={self.inter},E={self.E},top{self.top_k}]"


# Qwen3-30B-A3B experts on the GPU (H 2048, I 768, 128 experts, top-8); awkward sizes off the block.
GPU_SHAPES = (MoeShape("experts", 256, 2048, 768, 128, 8), MoeShape("experts_decode", 1, 2048, 768, 128, 8),
              MoeShape("experts_awkward", 37, 1040, 200, 60, 6))
CPU_SHAPES = (MoeShape("experts", 16, 64, 48, 8, 2), MoeShape("experts_decode", 1, 64, 48, 8, 2),
              MoeShape("experts_awkward", 7, 72, 40, 5, 3))


def _inputs(ctx: Context, s: MoeShape, dtype: torch.dtype = torch.bfloat16):
    from validation.kernels.triton_moe import route

    g = torch.Generator().manual_seed(ctx.seed * 1_000_003 + s.T * 131 + s.E)
    x = torch.randn(s.T, s.H, generator=g)
    w1 = torch.randn(s.E, 2 * s.inter, s.H, generator=g) / s.H**0.5
    w2 = torch.randn(s.E, s.H, s.inter, generator=g) / s.inter**0.5
    weights, ids = route(torch.randn(s.T, s.E, generator=g), s.top_k)
    dev = ctx.info.torch_device
    return x.to(dev, dtype), w1.to(dev, dtype), w2.to(dev, dtype), weights.to(dev), ids.to(dev)


def run(ctx: Context) -> CheckResult:
    from validation.kernels.triton_moe import fused_moe, reference_moe

    shapes = GPU_SHAPES if ctx.full_shapes else CPU_SHAPES
    mode = "interpreter" if interpreting() else "compiled"
    cases = []
    for s in shapes:
        x, w1, w2, weights, ids = _inputs(ctx, s)
        out = fused_moe(x, w1, w2, weights, ids)
        cases.append(Case.measured(s.label, compare(out, reference_moe(x, w1, w2, weights, ids)),
                                   f"triton({mode})", "bf16, softmax top-k renormalised, SiLU-gated"))
    aiter_cases, launches = aiter_moe_cases.cases(ctx, shapes, _inputs)
    return CheckResult.from_cases(NAME, aiter_cases + cases, {"aiter_launches": launches})
