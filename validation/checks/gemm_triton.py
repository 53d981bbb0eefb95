"""Triton GEMMs: aiter's fp8 GEMM where it can run, and always our own fp8 and bf16 kernels."""

from __future__ import annotations

import torch

from validation.aiter_probe import try_import
from validation.checks.common import fp8_operands, operands, reference, shapes
from validation.checks.context import Context
from validation.device import interpreting
from validation.metrics import compare
from validation.report import Case, CheckResult

NAME = "gemm-triton"


def run(ctx: Context) -> CheckResult:
    from validation.kernels.triton_gemm import config_for

    cases = _aiter_cases(ctx) + _own_cases(ctx)
    cfg = config_for(ctx.info.torch_device)
    where = "Triton interpreter (TRITON_INTERPRET=1)" if interpreting() else "compiled"
    return CheckResult.from_cases(NAME, cases, {"own_kernel_config": cfg.__dict__, "mode": where})


def _aiter_cases(ctx: Context) -> list[Case]:
    why = ctx.aiter_on_gpu
    if why:
        return [Case.skipped("aiter.gemm_a8w8", "aiter-triton", why)]
    mod, err = try_import("aiter.ops.triton.gemm_a8w8")
    if mod is None:
        return [Case.verdict("aiter.gemm_a8w8", False, "aiter-triton", err)]
    cases = []
    for s in shapes(ctx):
        op = fp8_operands(ctx, *operands(ctx, s))
        if not op.native:
            cases.append(Case.skipped(f"aiter fp8 {s.label}", "aiter-triton", op.note))
            continue
        # aiter's per-token/per-channel scales: [M,1] and [1,N], here filled with the per-tensor scale.
        xs = op.sa.expand(s.M, 1).contiguous()
        ws = op.sw.expand(1, s.N).contiguous()
        out = mod.gemm_a8w8(op.qa, op.qw, xs, ws, dtype=torch.bfloat16)
        cases.append(Case.measured(f"aiter fp8 {s.label}", compare(out, op.ref), "aiter-triton", op.note))
    return cases


def _own_cases(ctx: Context) -> list[Case]:
    from validation.kernels.triton_gemm import scaled_gemm

    mode = "interpreter" if interpreting() else "compiled"
    cases = []
    for s in shapes(ctx):
        a, w = operands(ctx, s)
        out, _ = scaled_gemm(a, w)
        cases.append(Case.measured(f"bf16 {s.label}", compare(out, reference(a, w)), f"triton({mode})"))
        op = fp8_operands(ctx, a, w)
        out, _ = scaled_gemm(op.qa, op.qw, op.sa, op.sw)
        cases.append(Case.measured(f"fp8 {s.label}", compare(out, op.ref), f"triton({mode})", op.note))
    return cases
