"""CK GEMM (aiter's gemm_a8w8_CK) when aiter was built with CK; a CK-free build skips with the reason."""

from __future__ import annotations

import os

import torch

from validation.aiter_probe import try_import
from validation.checks.common import fp8_operands, operands, shapes
from validation.checks.context import Context
from validation.metrics import compare
from validation.report import Case, CheckResult

NAME = "gemm-ck"


def ck_built(ctx: Context) -> tuple[bool, str]:
    if os.environ.get("ENABLE_CK") == "0":
        return False, "aiter built CK-free (ENABLE_CK=0)"
    assert ctx.aiter_root is not None
    mods = sorted(p.name for p in ctx.aiter_root.glob("jit/module_gemm_a8w8*.so"))
    if not mods:
        return False, f"no prebuilt CK GEMM module (jit/module_gemm_a8w8*.so) under {ctx.aiter_root}: CK-free build"
    return True, ", ".join(mods)


def run(ctx: Context) -> CheckResult:
    if not ctx.aiter_installed:
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", "aiter not installed")])
    built, why = ck_built(ctx)
    if not built:
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", why)])
    if ctx.aiter_on_gpu:
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", ctx.aiter_on_gpu)])
    ops, err = try_import("aiter")
    if ops is None:
        return CheckResult.from_cases(NAME, [Case.verdict("ck", False, "ck", err)])
    cases = []
    for s in shapes(ctx):
        op = fp8_operands(ctx, *operands(ctx, s))
        xs = op.sa.expand(s.M, 1).contiguous()
        ws = op.sw.expand(s.N, 1).contiguous()
        out = ops.gemm_a8w8_CK(op.qa, op.qw, xs, ws, dtype=torch.bfloat16)
        cases.append(Case.measured(f"fp8 {s.label}", compare(out, op.ref), "ck", why))
    return CheckResult.from_cases(NAME, cases)
