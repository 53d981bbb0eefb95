"""fp8 quantisation with the arch's dtype and max (per tensor, per row, per block), and carrying one fp8 type's
values in another where a device lacks the arch's own type (torch casts to fp8 on any device)."""

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


def quantise_blocks(x: torch.Tensor, dtype: torch.dtype, fp8_max: float, rows: int, cols: int):
    """One scale per rows x cols block of a 2-D x (edge blocks partial): (q, scale [ceil(R/rows), ceil(C/cols)]).

    (1, C) is per-row (per-token, per-channel); (1, 128) and (128, 128) are DeepSeek-style block scales.
    """
    scale = _block_amax(x, rows, cols) / fp8_max
    q = (x.float() / _expand_blocks(scale, rows, cols, x.shape)).clamp(-fp8_max, fp8_max).to(dtype)
    return q, scale


def dequantise_blocks(q: torch.Tensor, scale: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    return q.float() * _expand_blocks(scale.float(), rows, cols, q.shape)


def _block_amax(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    R, C = x.shape
    br, bc = -(-R // rows), -(-C // cols)
    padded = torch.zeros(br * rows, bc * cols, device=x.device)
    padded[:R, :C] = x.float().abs()
    return padded.view(br, rows, bc, cols).amax(dim=(1, 3)).clamp(min=1e-12)


def _expand_blocks(scale: torch.Tensor, rows: int, cols: int, shape) -> torch.Tensor:
    return scale.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[: shape[0], : shape[1]]


def inexact_values(src: torch.dtype, dst: torch.dtype) -> list[float]:
    """Every finite value of the 8-bit float type src that dst does not hold exactly (all 256 bit patterns)."""
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(src).float()
    values = values[torch.isfinite(values)]
    return sorted(set(values[values.to(dst).float() != values].tolist()))


def carry(q: torch.Tensor, carrier: torch.dtype) -> tuple[torch.Tensor, int]:
    """q's values in the carrier type, and how many elements did not survive exactly (0: bit-for-bit the same)."""
    carried = q.float().to(carrier)
    return carried, int((carried.float() != q.float()).sum())
