"""hipBLASLt: aiter's tuned-GEMM entry (and its fallback for untuned shapes), else torch's BLAS-Lt path."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from validation import aiter_lookup
from validation.aiter_probe import try_import
from validation.checks.common import fp8_operands, operands, reference, shapes
from validation.checks.context import Context
from validation.metrics import compare
from validation.report import Case, CheckResult

NAME = "gemm-hipblaslt"
# M, N, K no tuned CSV carries (odd sizes), so the lookup must take its default.
UNTUNED = (4099, 4097, 4096)
# The same with N and K multiples of 64: pre-shuffled weights of such shapes may take aiter's asm default.
UNTUNED_PRESHUFFLED = (4099, 4096, 4096)


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
    return _executed_fallback_case(ctx, name)


def _executed_fallback_case(ctx: Context, name: str) -> Case:
    """aiter cannot run here: execute its lookup for the target arch with its runtime stubbed, no tuned CSV."""
    cu = ctx.cu_num or ctx.arch.default_cu_num
    try:
        with aiter_lookup.load(ctx.aiter_root, ctx.arch.name, cu) as lookup:
            picked = untuned_libtypes(lookup.config, lookup.accepts("bpreshuffle"))
            where = lookup.describe()
    except aiter_lookup.AiterLookupError as e:
        return Case.verdict(name, False, "aiter-executed", f"{e} (aiter itself not run: {ctx.aiter_on_gpu})")
    got = "; ".join(f"{q} -> {lib!r}" for q, lib in picked.items())
    ok = set(picked.values()) == {"hipblaslt"}
    return Case.verdict(name, ok, "aiter-executed",
                        f"bf16 {got}; {where}, no tuned CSV; aiter itself not run ({ctx.aiter_on_gpu})")


def untuned_libtypes(config, preshuffle: bool) -> dict[str, str]:
    """{query: libtype} a lookup `config(M, N, K, bpreshuffle=...)` gives the untuned shapes: the plain one, and
    the pre-shuffled one where the lookup has bpreshuffle (amd-aiter 0.1.7's has not)."""
    queries = [(UNTUNED, False)] + ([(UNTUNED_PRESHUFFLED, True)] if preshuffle else [])
    return {f"untuned M={M} N={N} K={K} bpreshuffle={pre}": config(M, N, K, bpreshuffle=pre).get("libtype")
            for (M, N, K), pre in queries}


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
