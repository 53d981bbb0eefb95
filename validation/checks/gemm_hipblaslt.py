"""hipBLASLt: aiter's tuned-GEMM entry (and its fallback for untuned shapes), else torch's BLAS-Lt path."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from validation.aiter_probe import try_import
from validation.aiter_source import fallback_libtypes
from validation.checks.common import fp8_operands, operands, reference, shapes
from validation.checks.context import Context
from validation.metrics import compare
from validation.report import Case, CheckResult

NAME = "gemm-hipblaslt"
# M, N, K no tuned CSV carries (odd sizes), so the lookup must take its default.
UNTUNED = (4099, 4097, 4096)


def run(ctx: Context) -> CheckResult:
    cases = _aiter_cases(ctx) + [_fallback_case(ctx)] + _torch_cases(ctx)
    return CheckResult.from_cases(NAME, cases)


def _aiter_cases(ctx: Context) -> list[Case]:
    why = ctx.aiter_on_gpu
    if why:
        return [Case.skipped("aiter.tgemm", "aiter", why)]
    tg, err = try_import("aiter.tuned_gemm")
    if tg is None:
        return [Case.verdict("aiter.tgemm", False, "aiter", err)]
    cases = []
    for s in shapes(ctx):
        a, w = operands(ctx, s)
        cfg = tg.get_GEMM_A16W16_config(M=s.M, N=s.N, K=s.K, bias=False, dtype=str(a.dtype), otype=str(a.dtype))
        out = tg.gemm_a16w16(a, w)
        cases.append(Case.measured(s.label, compare(out, reference(a, w)), f"aiter:{cfg.get('libtype')}"))
    return cases


def _fallback_case(ctx: Context) -> Case:
    """An untuned shape must go to hipBLASLt, not torch (the 570x slowdown)."""
    name = "untuned-shape-fallback"
    if ctx.aiter_on_gpu is None:
        tg, err = try_import("aiter.tuned_gemm")
        if tg is None:
            return Case.verdict(name, False, "aiter", err)
        M, N, K = UNTUNED
        cfg = tg.get_GEMM_A16W16_config(M=M, N=N, K=K, bias=False, dtype=str(torch.bfloat16),
                                        otype=str(torch.bfloat16))
        lib = cfg.get("libtype")
        return Case.verdict(name, lib == "hipblaslt", "aiter", f"lookup for M={M} N={N} K={K} picked {lib!r}")
    if ctx.aiter_root is None:
        return Case.skipped(name, "aiter", "aiter not installed and no --aiter-src: nothing to look up")
    src = ctx.aiter_root / "tuned_gemm.py"
    if not src.is_file():
        return Case.verdict(name, False, "aiter-source", f"{src} missing")
    libs = fallback_libtypes(src)
    return Case.verdict(name, libs == {"hipblaslt"}, "aiter-source",
                        f"lookup not runnable here ({ctx.aiter_on_gpu}); read from {src.name}: untuned shapes "
                        f"fall back to {sorted(libs)}")


def _torch_cases(ctx: Context) -> list[Case]:
    cases = []
    for s in shapes(ctx):
        a, w = operands(ctx, s)
        if ctx.on_gpu:
            lib = "hipBLASLt" if ctx.info.is_amd else "cuBLASLt"
            cases.append(Case.measured(f"bf16 {s.label}", compare(F.linear(a, w), reference(a, w)),
                                       f"torch:{lib}", "F.linear bf16"))
        else:
            cases.append(Case.measured(f"bf16 {s.label}", compare(a @ w.T, reference(a, w)), "torch:cpu",
                                       "CPU: torch.matmul in bf16, not hipBLASLt"))
        cases.append(_fp8_case(ctx, s, a, w))
    return cases


def _fp8_case(ctx: Context, s, a, w) -> Case:
    op = fp8_operands(ctx, a, w)
    if op.native and ctx.on_gpu:
        out = torch._scaled_mm(op.qa, op.qw.T, scale_a=op.sa.reshape(()), scale_b=op.sw.reshape(()),
                               out_dtype=torch.bfloat16)
        backend = "torch._scaled_mm"
    else:
        out = ((op.qa.to(torch.bfloat16) @ op.qw.to(torch.bfloat16).T).float() * op.sa * op.sw).to(torch.bfloat16)
        backend = "torch.matmul(emulated fp8)"
        note = (f"{ctx.arch.fp8_dtype} (max {ctx.arch.fp8_max:g}) EMULATED: quantised in torch, "
                f"matmul in bf16 on {ctx.info.name}")
        return Case.measured(f"fp8 {s.label}", compare(out, op.ref), backend, note)
    return Case.measured(f"fp8 {s.label}", compare(out, op.ref), backend, op.note)
