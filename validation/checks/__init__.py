"""One module per check; each exposes NAME and run(ctx) -> CheckResult."""

from __future__ import annotations

import time
import traceback

from validation.checks import (
    arch_consistency,
    atom_reroutes,
    first_use_compile,
    gemm_asm,
    gemm_ck,
    gemm_hipblaslt,
    gemm_triton,
    lds_budget,
    moe_triton,
    payload_arch,
    servable,
    tuned_csv_coverage,
)
from validation.checks.context import Context
from validation.checks.report import FAILED, CheckResult

CHECKS = {m.NAME: m for m in (arch_consistency, gemm_hipblaslt, gemm_triton, moe_triton, atom_reroutes, gemm_ck,
                              gemm_asm, lds_budget, tuned_csv_coverage, payload_arch, first_use_compile, servable)}


def run_check(name: str, ctx: Context) -> CheckResult:
    """A check that raises is a failed check with the error as its reason, never a crashed run."""
    start = time.perf_counter()
    try:
        result = CHECKS[name].run(ctx)
    except Exception as e:  # noqa: BLE001 - reported, with the last frame, as this check's failure
        where = traceback.extract_tb(e.__traceback__)[-1]
        result = CheckResult(name, FAILED, f"{type(e).__name__}: {e} (at {where.filename}:{where.lineno})")
    result.wall_s = round(time.perf_counter() - start, 3)
    return result
