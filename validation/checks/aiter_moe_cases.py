"""aiter's Triton fused MoE, a whole SiLU-gated expert layer: tokens sorted by aiter's moe_align_block_size,
gate_up and down through aiter's fused_moe (routing weights applied in the second) with aiter's MoE config for the
target arch, against the per-expert fp32 loop."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from validation.checks.aiter_launch import open_aiter, run_case
from validation.checks.context import Context
from validation.checks.report import Case
from validation.core.device import interpreting


def cases(ctx: Context, shapes, inputs) -> tuple[list[Case], list[dict]]:
    """inputs(ctx, shape, dtype) -> (x, w1, w2, weights, ids), the moe-triton check's seeded inputs."""
    at, why_not = open_aiter(ctx, "aiter fused_moe")
    if at is None:
        return why_not, []
    dtype, note = bf16_or_fp16()
    out, rows = [], []
    for s in shapes:
        tensors = inputs(ctx, s, dtype)
        body = _body(at, s, tensors, dtype)
        case, row = run_case(at, "fused_moe", f"aiter fused_moe {s.label}", body, (2, 2), note)
        out.append(case)
        rows += [row] if row else []
    return out, rows


def bf16_or_fp16() -> tuple[torch.dtype, str]:
    """bf16, or fp16 where Triton's interpreter cannot take a bf16 dot on this CPU."""
    if interpreting() and (why := _interpreter().bf16_dot()):
        return torch.float16, f"fp16 on the CPU, bf16 on a GPU ({why})"
    return torch.bfloat16, "bf16"


def _body(at, s, tensors, dtype):
    from validation.kernels.triton_moe import reference_moe

    def body():
        x, w1, w2, weights, ids = tensors
        cfg = at.moe_config(dtype, s.T)
        ids32, weights = ids.to(torch.int32).contiguous(), weights.float().contiguous()
        sorted_ids, expert_ids, post = _align(ids32, s.E, cfg["BLOCK_SIZE_M"])
        compute = _triton_dtype(dtype)

        def gemm(a, w, c, routed, top_k):
            return lambda f, conf: f(a, w, c, None, None, None, weights, ids32, sorted_ids, expert_ids, post,
                                     routed, top_k, compute, False, False, False, config=conf)

        h = torch.zeros(s.T, s.top_k, 2 * s.inter, device=x.device, dtype=dtype)
        _, first = at.launch("fused_moe", cfg, gemm(x, w1, h, False, s.top_k))
        h = h.view(-1, 2 * s.inter).float()
        act = (F.silu(h[:, : s.inter]) * h[:, s.inter:]).to(dtype)
        y = torch.zeros(s.T, s.top_k, s.H, device=x.device, dtype=dtype)
        _, second = at.launch("fused_moe", cfg, gemm(act, w2, y, True, 1))
        first.shared += second.shared
        first.wall_s = round(first.wall_s + second.wall_s, 4)
        first.warm_s = None if first.warm_s is None else round(first.warm_s + second.warm_s, 6)
        origin = f"aiter moe/{at.arch.aiter_config_prefix}-MOE-DEFAULT.json, its pick for M={s.T}"
        return y.float().sum(1), reference_moe(x, w1, w2, weights, ids), first, origin, ""

    return body


def _align(ids: torch.Tensor, experts: int, block: int):
    """aiter's moe_align_block_size_triton, with the buffers sized as aiter's own tests size them."""
    import triton
    from aiter.ops.triton.moe.moe_align_block_size import moe_align_block_size_triton

    padded = ids.numel() + experts * (block - 1)
    sorted_ids = torch.full((padded,), ids.numel(), dtype=torch.int32, device=ids.device)
    expert_ids = torch.empty(triton.cdiv(padded, block), dtype=torch.int32, device=ids.device)
    post = torch.empty(1, dtype=torch.int32, device=ids.device)
    moe_align_block_size_triton(ids, experts, block, sorted_ids, expert_ids, post)
    return sorted_ids, expert_ids, post


def _triton_dtype(dtype: torch.dtype):
    import triton.language as tl

    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[dtype]


def _interpreter():
    # Imported on first use: its probe kernels must be decorated after the CLI sets TRITON_INTERPRET.
    from validation.core import interpreter

    return interpreter
