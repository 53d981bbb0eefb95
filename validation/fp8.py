"""Per-tensor fp8 quantisation with the arch's dtype and max (torch casts to fp8 on any device)."""

from __future__ import annotations

import torch


def fp8_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def quantise(x: torch.Tensor, dtype: torch.dtype, fp8_max: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (q, scale) with x ~= q.float() * scale; scale maps amax to the arch's fp8 max."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = amax / fp8_max
    q = (x.float() / scale).clamp(-fp8_max, fp8_max).to(dtype)
    return q, scale.reshape(1)


def dequantise(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.float()
