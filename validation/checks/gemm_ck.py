"""CK GEMM (aiter's gemm_a8w8_CK) when aiter was built with CK; a CK-free build skips, saying who said so."""

from __future__ import annotations

import torch

from validation.aiterpkg.locate import try_import
from validation.checks.common import fp8_operands, operands, shapes
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult

NAME = "gemm-ck"


def ck_built(ctx: Context) -> tuple[bool, str]:
    """Was aiter built with CK, and which source decided: --ck-mode, the image's environment, or aiter's files."""
    if ctx.ck_mode is not None:
        return ctx.ck_mode == "ck", f"CK mode {ctx.ck_mode} ({ctx.ck_mode_source})"
    assert ctx.aiter_root is not None
    mods = sorted(p.name for p in ctx.aiter_root.glob("jit/module_gemm_a8w8*.so"))
    if not mods:
        return False, (f"CK mode ckfree (detected: no prebuilt CK GEMM module jit/module_gemm_a8w8*.so under "
                       f"{ctx.aiter_root})")
    return True, f"CK mode ck (detected: {', '.join(mods)})"


def run(ctx: Context) -> CheckResult:
    if ctx.ck_mode_error:
        return CheckResult.from_cases(NAME, [Case.verdict("ck-mode", False, "env", ctx.ck_mode_error)])
    if not ctx.aiter_installed:
        said = f" ({ctx.ck_mode_source}: CK mode {ctx.ck_mode})" if ctx.ck_mode else ""
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", "aiter not installed" + said)])
    built, why = ck_built(ctx)
    if not built:
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", why)])
    if ctx.aiter_on_gpu:
        return CheckResult.from_cases(NAME, [Case.skipped("ck", "ck", f"{why}; {ctx.aiter_on_gpu}")])
    ops, err = try_import("aiter")
    if ops is None:
        return CheckResult.from_cases(NAME, [Case.verdict("ck", False, "ck", f"{why}; {err}")])
    cases = []
    for s in shapes(ctx):
        op = fp8_operands(ctx, *operands(ctx, s))
        xs = op.sa.expand(s.M, 1).contiguous()
        ws = op.sw.expand(s.N, 1).contiguous()
        out = ops.gemm_a8w8_CK(op.qa, op.qw, xs, ws, dtype=torch.bfloat16)
        cases.append(Case.measured(f"fp8 {s.label}", compare(out, op.ref), "ck", why))
    return CheckResult.from_cases(NAME, cases)
