"""Scaled GEMM in Triton: C = (A @ W^T) * scale_a * scale_b, A [M,K], W [N,K] (nn.Linear layout).

A and W may be fp8 or bf16; accumulation is fp32, output bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from validation.core.device import interpreting


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3


# Small blocks keep the CPU interpreter fast; the GPU config is a common Hopper/MI300 tile.
CPU_CONFIG = GemmConfig(16, 32, 32, num_warps=1, num_stages=1)
GPU_CONFIG = GemmConfig(64, 64, 64, num_warps=4, num_stages=3)


@triton.jit
def _scaled_gemm_kernel(
    a_ptr, w_ptr, c_ptr, sa_ptr, sb_ptr,
    M, N, K,
    stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    K_TILES: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # K_TILES is a constexpr: the interpreter with numpy>=2.4 cannot loop over a runtime scalar argument.
    for kt in range(0, K_TILES):
        k = kt * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * stride_wn + k[:, None] * stride_wk,
                    mask=(rn[None, :] < N) & (k[:, None] < K), other=0.0)
        if UPCAST:
            # The interpreter's bf16 dot returns garbage in triton 3.6; fp32 operands are exact for bf16/fp8.
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc += tl.dot(a, w)
    acc = acc * tl.load(sa_ptr) * tl.load(sb_ptr)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def config_for(device: torch.device) -> GemmConfig:
    return CPU_CONFIG if device.type == "cpu" else GPU_CONFIG


def scaled_gemm(a: torch.Tensor, w: torch.Tensor, scale_a: torch.Tensor | None = None,
                scale_b: torch.Tensor | None = None, cfg: GemmConfig | None = None):
    """Returns (C bf16 [M,N], the compiled kernel handle or None under the interpreter)."""
    M, K = a.shape
    N = w.shape[0]
    cfg = cfg or config_for(a.device)
    one = torch.ones(1, device=a.device, dtype=torch.float32)
    sa = one if scale_a is None else scale_a.to(a.device, torch.float32)
    sb = one if scale_b is None else scale_b.to(a.device, torch.float32)
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, cfg.block_m), triton.cdiv(N, cfg.block_n))
    handle = _scaled_gemm_kernel[grid](
        a, w, c, sa, sb, M, N, K,
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        K_TILES=triton.cdiv(K, cfg.block_k), UPCAST=interpreting(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c, (None if interpreting() else handle)
