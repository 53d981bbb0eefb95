"""hipBLASLt: aiter's GEMM dispatcher, called as ATOM calls it, must reach hipBLASLt for untuned shapes.

aiter's dispatcher (tgemm.mm, what ATOM's linear layers call) runs through validation.aiterpkg.gemm_dispatch, which
records the backend entry point it reaches: on an AMD GPU aiter's installed package with its real kernels,
elsewhere aiter's tuned_gemm.py executed with its runtime stubbed at the kernel boundary (--aiter-src or the
installed files). Every case names the backend it reached. Then torch's own BLAS-Lt path, and fp8.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from validation.aiterpkg import gemm_dispatch, tuned_lookup
from validation.aiterpkg.gemm_dispatch import HIPBLASLT, TORCH, Call
from validation.aiterpkg.locate import try_import
from validation.aiterpkg.tuned_csv import tuned_paths
from validation.checks.common import (
    GPU_SHAPES,
    fp8_operands,
    operands,
    reference,
    shapes,
)
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult

NAME = "gemm-hipblaslt"
# M, N, K no tuned CSV carries (odd sizes), so the lookup must take its default.
UNTUNED = (4099, 4097, 4096)
# The same with N and K multiples of 64: pre-shuffled weights of such shapes may take aiter's asm default.
UNTUNED_PRESHUFFLED = (4099, 4096, 4096)
NO_ASM_ARCH = "gfx950"


def run(ctx: Context) -> CheckResult:
    return CheckResult.from_cases(NAME, dispatch_cases(ctx) + _torch_cases(ctx))


def untuned_calls(ctx: Context, preshuffle: bool) -> list[Call]:
    """ATOM's linear calls that no tuned CSV holds: bf16, pre-shuffled bf16 (where aiter has bpreshuffle), fp8."""
    calls = [Call(*UNTUNED)]
    calls += [Call(*UNTUNED_PRESHUFFLED, preshuffled=True)] if preshuffle else []
    return calls + [Call(*UNTUNED_PRESHUFFLED, dtype=getattr(torch, ctx.arch.fp8_dtype), scaled=True)]


def model_calls() -> list[tuple[str, Call]]:
    """The Llama-3-8B layers of the GPU cases, bf16 as ATOM calls them (they may be tuned)."""
    return [(s.label, Call(s.M, s.N, s.K)) for s in GPU_SHAPES]


def dispatch_cases(ctx: Context) -> list[Case]:
    if ctx.aiter_on_gpu is None:
        return _installed_cases(ctx)
    if ctx.aiter_root is None:
        return [Case.skipped("aiter-dispatch", "aiter", "aiter not installed and no --aiter-src: no dispatcher")]
    return _stubbed_cases(ctx)


def from_tuned_row(config: dict) -> bool:
    """aiter answered a row of its tuned CSV (which carries the tuner's time, `us`), not its default."""
    return "us" in config


def judge(ctx: Context, name: str, call: Call, config: dict, trace, untuned: bool) -> Case:
    """The untuned probes: hipBLASLt and nothing else. A model layer: the backend its config names, where aiter's
    default (no tuned row) may be skinny but never torch. Never asm on gfx950."""
    said = config.get("libtype")
    expected = HIPBLASLT if untuned or (said == TORCH and not from_tuned_row(config)) else said
    reached = trace.backends()
    lookup = f"aiter's lookup said {said!r} ({'tuned row' if from_tuned_row(config) else 'its default'})"
    if ctx.arch.name == NO_ASM_ARCH and gemm_dispatch.ASM in reached:
        return Case.verdict(name, False, _backend(reached), f"reached {trace.says()} on {NO_ASM_ARCH}; {lookup}")
    if reached != [expected]:
        return Case.verdict(name, False, _backend(reached), f"reached {trace.says()}, not {expected}; {lookup}")
    return Case.verdict(name, True, _backend(reached), f"reached {trace.says()}; {lookup}")


def _backend(reached: list[str]) -> str:
    return "aiter-dispatch:" + ("+".join(reached) or "none")


def _stubbed_cases(ctx: Context) -> list[Case]:
    """aiter cannot run here: its dispatcher executed with its runtime stubbed, on meta tensors."""
    cu = ctx.cu_num or ctx.arch.default_cu_num
    paths, source = tuned_paths(ctx.tuned_csv, ctx.aiter_root)
    paths = [p for p in paths if p.is_file()]
    if paths and not tuned_lookup.pandas_available():
        paths, source = [], "none: pandas is not installed (aiter reads its tuned CSV with pandas)"
    kernels = gemm_dispatch.StubbedKernels()
    try:
        with tuned_lookup.load(ctx.aiter_root, ctx.arch.name, cu, paths, on_call=kernels) as lookup:
            how = (f"tgemm.mm EXECUTED from {lookup.source} with aiter's runtime stubbed at the kernel boundary "
                   f"(validation.aiterpkg.gemm_dispatch), get_gfx()={ctx.arch.name}, get_cu_num()={cu}, tuned CSV "
                   f"{source or 'none'}; aiter itself not run ({ctx.aiter_on_gpu})")
            calls = [(f"untuned {c.label}", c, True) for c in untuned_calls(ctx, lookup.accepts("bpreshuffle"))]
            calls += [(label, c, False) for label, c in model_calls()]
            cases = [_stubbed_case(ctx, lookup, kernels, name, call, untuned) for name, call, untuned in calls]
    except tuned_lookup.AiterLookupError as e:
        return [Case.verdict("aiter-dispatch", False, "aiter-dispatch", str(e))]
    cases[0].note += f"; {how}"
    return cases


def _stubbed_case(ctx, lookup, kernels, name: str, call: Call, untuned: bool) -> Case:
    try:
        config = lookup.config(call.M, call.N, call.K, **call.lookup_keywords())
        trace = gemm_dispatch.run_stubbed(lookup.module, kernels, call)
    except tuned_lookup.AiterLookupError as e:
        return Case.verdict(name, False, "aiter-dispatch", str(e))
    except Exception as e:  # noqa: BLE001 - the dispatcher's own failure is this case's finding
        return Case.verdict(name, False, "aiter-dispatch", f"tgemm.mm raised {type(e).__name__}: {e}; "
                            f"reached so far: {kernels.trace.says()}")
    return judge(ctx, name, call, config, trace, untuned)


def _installed_cases(ctx: Context) -> list[Case]:
    """aiter runs here: its own dispatcher with the real kernels, entry points recorded, output compared."""
    tg, err = try_import("aiter.tuned_gemm")
    if tg is None:
        return [Case.verdict("aiter-dispatch", False, "aiter", err)]
    how = "tgemm.mm of the installed aiter, real kernels (validation.aiterpkg.gemm_dispatch.run_installed)"
    fn = tg.get_GEMM_A16W16_config
    calls = [(f"untuned {c.label}", c, True)
             for c in untuned_calls(ctx, tuned_lookup.accepts(fn, "bpreshuffle")) if not c.preshuffled]
    calls += [(label, c, False) for label, c in model_calls()]
    cases = []
    for name, call, untuned in calls:
        config = tuned_lookup.call(fn, call.M, call.N, call.K, **call.lookup_keywords())
        trace, out, (x, w, _) = gemm_dispatch.run_installed(tg, call, ctx.info.torch_device)
        case = judge(ctx, name, call, config, trace, untuned)
        if case.status == "passed" and not call.scaled:
            case = Case.measured(name, compare(out, reference(x, w)), case.backend, case.note)
        cases.append(case)
    cases[0].note += f"; {how}"
    return cases


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
