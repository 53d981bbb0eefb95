"""Seeded inputs, layer-named shapes, and fp8 operands in the arch's dtype (native or emulated)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from validation.checks import fp8
from validation.checks.context import Context
from validation.core.device import fp8_native


@dataclass(frozen=True)
class Shape:
    layer: str
    M: int
    N: int
    K: int

    @property
    def label(self) -> str:
        return f"{self.layer}[M={self.M},N={self.N},K={self.K}]"


# Llama-3-8B TP1 layers on the GPU; awkward = M, N, K off every block size (but multiples of 16 for
# torch._scaled_mm). The CPU keeps the names and the awkwardness at interpreter-friendly sizes.
GPU_SHAPES = (Shape("qkv_proj", 128, 6144, 4096), Shape("o_proj", 128, 4096, 4096),
              Shape("gate_up", 256, 28672, 4096), Shape("down", 128, 4096, 14336),
              Shape("decode_m1", 1, 4096, 4096), Shape("awkward", 33, 1008, 1040))
CPU_SHAPES = (Shape("qkv_proj", 16, 96, 64), Shape("o_proj", 16, 64, 64), Shape("gate_up", 16, 128, 64),
              Shape("down", 16, 64, 128), Shape("decode_m1", 1, 64, 64), Shape("awkward", 33, 80, 112))


def shapes(ctx: Context) -> tuple[Shape, ...]:
    return GPU_SHAPES if ctx.full_shapes else CPU_SHAPES


def operands(ctx: Context, s: Shape, salt: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 A [M,K] and W [N,K], seeded per shape, made on the CPU so every device sees the same numbers."""
    g = torch.Generator().manual_seed(ctx.seed * 1_000_003 + s.M * 7919 + s.N * 31 + s.K + salt)
    a = torch.randn(s.M, s.K, generator=g)
    w = torch.randn(s.N, s.K, generator=g) / s.K**0.5
    dev = ctx.info.torch_device
    return a.to(dev, torch.bfloat16), w.to(dev, torch.bfloat16)


@dataclass
class Fp8Operands:
    qa: torch.Tensor  # fp8 in the arch's dtype, or the same values carried in bf16 when emulated
    qw: torch.Tensor
    sa: torch.Tensor
    sw: torch.Tensor
    ref: torch.Tensor  # fp32: dequantise, then matmul
    native: bool
    note: str


def fp8_operands(ctx: Context, a: torch.Tensor, w: torch.Tensor) -> Fp8Operands:
    dtype = fp8.fp8_dtype(ctx.arch.fp8_dtype)
    qa, sa = fp8.quantise(a, dtype, ctx.arch.fp8_max)
    qw, sw = fp8.quantise(w, dtype, ctx.arch.fp8_max)
    ref = fp8.dequantise(qa, sa) @ fp8.dequantise(qw, sw).T
    native, why = fp8_native(ctx.arch.fp8_dtype, ctx.info)
    if native:
        return Fp8Operands(qa, qw, sa, sw, ref, True, f"{ctx.arch.fp8_dtype} (max {ctx.arch.fp8_max:g}) {why}".strip())
    # Every e4m3 value is exact in bf16, so carrying them in bf16 emulates the fp8 GEMM bit for bit.
    note = (f"{ctx.arch.fp8_dtype} (max {ctx.arch.fp8_max:g}) EMULATED: quantise/dequantise in torch, "
            f"values carried in bf16 ({why})")
    return Fp8Operands(qa.to(torch.bfloat16), qw.to(torch.bfloat16), sa, sw, ref, False, note)


def reference(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return a.float() @ w.float().T
