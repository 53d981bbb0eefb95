"""Triton fused MoE: aiter's where it can run, and always ours, against a per-expert torch loop."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from validation.aiter_probe import try_import
from validation.checks.context import Context
from validation.device import interpreting
from validation.metrics import compare
from validation.report import Case, CheckResult

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


def _inputs(ctx: Context, s: MoeShape):
    from validation.kernels.triton_moe import route

    g = torch.Generator().manual_seed(ctx.seed * 1_000_003 + s.T * 131 + s.E)
    x = torch.randn(s.T, s.H, generator=g)
    w1 = torch.randn(s.E, 2 * s.inter, s.H, generator=g) / s.H**0.5
    w2 = torch.randn(s.E, s.H, s.inter, generator=g) / s.inter**0.5
    weights, ids = route(torch.randn(s.T, s.E, generator=g), s.top_k)
    dev = ctx.info.torch_device
    return (x.to(dev, torch.bfloat16), w1.to(dev, torch.bfloat16), w2.to(dev, torch.bfloat16),
            weights.to(dev), ids.to(dev))


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
    cases += _aiter_cases(ctx, shapes)
    return CheckResult.from_cases(NAME, cases)


def _aiter_cases(ctx: Context, shapes) -> list[Case]:
    """aiter's Triton fused_moe, first (gate_up) GEMM only, against the same per-expert loop."""
    why = ctx.aiter_on_gpu
    if why:
        return [Case.skipped("aiter.fused_moe", "aiter-triton", why)]
    mod, err = try_import("aiter.ops.triton.moe_op")
    if mod is None:
        return [Case.verdict("aiter.fused_moe", False, "aiter-triton", err)]
    import triton.language as tl

    from validation.kernels.triton_moe import align_by_expert

    cases = []
    for s in shapes:
        x, w1, _, weights, ids = _inputs(ctx, s)
        block = 64
        sorted_ids, expert_ids, _ = align_by_expert(ids, s.E, block)
        c = torch.zeros(s.T, s.top_k, 2 * s.inter, device=x.device, dtype=torch.bfloat16)
        post = torch.tensor([sorted_ids.numel()], device=x.device, dtype=torch.int32)
        cfg = {"BLOCK_SIZE_M": block, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
        mod.fused_moe(x, w1, c, None, None, None, weights, ids.to(torch.int32), sorted_ids, expert_ids, post,
                      False, s.top_k, tl.bfloat16, False, False, False, config=cfg)
        ref = torch.zeros(c.shape, device=x.device)
        for e in range(s.E):
            tok, slot = (ids == e).nonzero(as_tuple=True)
            ref[tok, slot] = x[tok].float() @ w1[e].float().T
        cases.append(Case.measured(f"aiter {s.label} gate_up", compare(c, ref), "aiter-triton"))
    return cases
