"""A small fused MoE in Triton: top-k routing, tokens sorted by expert, grouped expert GEMMs.

x [T,H]; w1 [E, 2I, H] (gate and up stacked); w2 [E, H, I]. bf16 in, fp32 accumulate, bf16 out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from validation.core.device import interpreting
from validation.kernels.triton_gemm import GemmConfig, config_for


@triton.jit
def _moe_gemm_kernel(
    a_ptr, w_ptr, c_ptr, sorted_ids_ptr, expert_ids_ptr, weights_ptr,
    num_pairs, N, K,
    stride_am, stride_ak, stride_we, stride_wn, stride_wk, stride_cm, stride_cn,
    TOP_K: tl.constexpr, A_PER_PAIR: tl.constexpr, MUL_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    K_TILES: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pairs = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = pairs < num_pairs  # padding slots hold num_pairs
    expert = tl.load(expert_ids_ptr + pid_m)
    # The first GEMM reads token rows (each token feeds TOP_K pairs); the second reads per-pair rows.
    rows = pairs if A_PER_PAIR else pairs // TOP_K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, K_TILES):
        k = kt * BLOCK_K + rk
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=valid[:, None] & (k[None, :] < K), other=0.0)
        w = tl.load(w_ptr + expert * stride_we + rn[None, :] * stride_wn + k[:, None] * stride_wk,
                    mask=(rn[None, :] < N) & (k[:, None] < K), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc += tl.dot(a, w)
    if MUL_WEIGHT:
        acc = acc * tl.load(weights_ptr + pairs, mask=valid, other=0.0)[:, None]
    tl.store(c_ptr + pairs[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=valid[:, None] & (rn[None, :] < N))


def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax then top-k, renormalised (Qwen3/Mixtral style). Returns (weights fp32, expert ids)."""
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = probs.topk(top_k, dim=-1)
    return weights / weights.sum(-1, keepdim=True), ids


def align_by_expert(ids: torch.Tensor, num_experts: int, block_m: int):
    """Pair indices sorted by expert, each expert's run padded to block_m; one expert id per block."""
    flat = ids.flatten()
    num_pairs = flat.numel()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts).tolist()
    sorted_ids, expert_ids, start = [], [], 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        blocks = triton.cdiv(n, block_m)
        pad = torch.full((blocks * block_m - n,), num_pairs, dtype=order.dtype, device=order.device)
        sorted_ids += [order[start:start + n], pad]
        expert_ids += [e] * blocks
        start += n
    return (torch.cat(sorted_ids).to(torch.int32), torch.tensor(expert_ids, dtype=torch.int32,
            device=ids.device), num_pairs)


def _grouped_gemm(a, w, sorted_ids, expert_ids, num_pairs, top_k, weights, a_per_pair, cfg: GemmConfig):
    E, N, K = w.shape
    c = torch.zeros((num_pairs, N), device=a.device, dtype=torch.bfloat16)
    grid = (expert_ids.numel(), triton.cdiv(N, cfg.block_n))
    _moe_gemm_kernel[grid](
        a, w, c, sorted_ids, expert_ids, weights, num_pairs, N, K,
        a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), c.stride(0), c.stride(1),
        TOP_K=top_k, A_PER_PAIR=a_per_pair, MUL_WEIGHT=a_per_pair,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        K_TILES=triton.cdiv(K, cfg.block_k), UPCAST=interpreting(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c


def fused_moe(x, w1, w2, weights, ids, cfg: GemmConfig | None = None) -> torch.Tensor:
    """SiLU-gated MoE with routing (weights, ids) already chosen; returns bf16 [T, H]."""
    cfg = cfg or config_for(x.device)
    T, top_k = ids.shape
    inter = w2.shape[2]
    sorted_ids, expert_ids, num_pairs = align_by_expert(ids, w1.shape[0], cfg.block_m)
    flat_w = weights.flatten().float().contiguous()
    h = _grouped_gemm(x, w1, sorted_ids, expert_ids, num_pairs, top_k, flat_w, False, cfg)
    act = (F.silu(h[:, :inter].float()) * h[:, inter:].float()).to(torch.bfloat16)
    out = _grouped_gemm(act, w2, sorted_ids, expert_ids, num_pairs, top_k, flat_w, True, cfg)
    return out.view(T, top_k, -1).float().sum(1).to(torch.bfloat16)


def reference_moe(x, w1, w2, weights, ids) -> torch.Tensor:
    """Per-expert loop in fp32: the plain-torch truth the kernel is held to."""
    xf, out = x.float(), torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float32, device=x.device)
    inter = w2.shape[2]
    for e in range(w1.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = xf[tok] @ w1[e].float().T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[e].float().T
        out.index_add_(0, tok, y * weights[tok, slot, None].float())
    return out
