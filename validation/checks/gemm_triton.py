"""Triton GEMMs: aiter's own (bf16, fp8 per-tensor/per-token/blockscale) where they can run, and always our own
fp8 and bf16 kernels."""

from __future__ import annotations

from validation.checks import aiter_gemm_cases
from validation.checks.common import fp8_operands, operands, reference, shapes
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult
from validation.core.device import interpreting

NAME = "gemm-triton"


def run(ctx: Context) -> CheckResult:
    from validation.kernels.triton_gemm import config_for

    aiter_cases, launches = aiter_gemm_cases.cases(ctx)
    cases = aiter_cases + _own_cases(ctx)
    cfg = config_for(ctx.info.torch_device)
    where = "Triton interpreter (TRITON_INTERPRET=1)" if interpreting() else "compiled"
    return CheckResult.from_cases(NAME, cases, {"own_kernel_config": cfg.__dict__, "mode": where,
                                                "aiter_launches": launches})


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
