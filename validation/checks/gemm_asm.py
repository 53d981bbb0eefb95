"""ASM GEMM: on gfx950 it must be unreachable through the tuned-GEMM entry, or proven correct on the GPU."""

from __future__ import annotations

import torch

from validation.aiter_probe import try_import
from validation.aiter_source import fallback_libtypes
from validation.checks.common import Shape, operands, reference
from validation.checks.context import Context
from validation.metrics import compare
from validation.report import Case, CheckResult
from validation.tuned_csv import CsvError, index, tuned_paths

NAME = "gemm-asm"
MAX_PROOF_SHAPES = 4


def run(ctx: Context) -> CheckResult:
    if ctx.aiter_root is None:
        return CheckResult.from_cases(NAME, [Case.skipped("asm", "asm", "aiter not installed and no --aiter-src")])
    cu = ctx.cu_num or ctx.arch.default_cu_num
    paths, source = tuned_paths(ctx.tuned_csv, ctx.aiter_root)
    try:
        table = index(paths, ctx.arch.name, cu)
    except CsvError as e:
        return CheckResult.from_cases(NAME, [Case.verdict("tuned-csv", False, "asm", str(e))])
    asm = [k for k, row in table.items() if row.get("libtype") == "asm"]
    src = ctx.aiter_root / "tuned_gemm.py"
    fallback = fallback_libtypes(src) if src.is_file() else set()
    reachable = bool(asm) or "asm" in fallback
    metrics = {"asm_rows": len(asm), "cu_num": cu, "csv_source": source, "fallback_libtypes": sorted(fallback)}
    note = f"{len(asm)} asm rows for cu_num {cu} in {source}; untuned fallback {sorted(fallback) or 'unknown'}"
    if not reachable:
        return CheckResult.from_cases(NAME, [Case.verdict("asm-reachable", True, "asm", "unreachable: " + note)],
                                      metrics)
    if ctx.aiter_on_gpu:
        ok = ctx.arch.name != "gfx950"
        case = (Case.verdict("asm-reachable", False, "asm", f"ASM reachable on gfx950 and not proven: {note}; "
                             f"{ctx.aiter_on_gpu}") if not ok else
                Case.skipped("asm-reachable", "asm", f"ASM enabled on {ctx.arch.name} ({note}); proving it correct "
                             f"needs the GPU: {ctx.aiter_on_gpu}"))
        return CheckResult.from_cases(NAME, [case], metrics)
    return CheckResult.from_cases(NAME, _prove(ctx, asm[:MAX_PROOF_SHAPES]), metrics)


def _prove(ctx: Context, keys) -> list[Case]:
    tg, err = try_import("aiter.tuned_gemm")
    if tg is None:
        return [Case.verdict("asm", False, "asm", err)]
    cases = []
    for k in keys:
        s = Shape("asm_row", k.M, k.N, k.K)
        a, w = operands(ctx, s)
        out = tg.gemm_a16w16(a, w, otype=getattr(torch, k.outdtype.removeprefix("torch.")))
        cases.append(Case.measured(s.label, compare(out, reference(a, w)), "aiter:asm"))
    return cases
