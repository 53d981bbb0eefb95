"""A model's GEMM shapes per TP size and token bucket, looked up in aiter's tuned bf16 CSVs.

Per TP size: passed at or above validation.aiterpkg.tuned_csv.COVERAGE_WARN_BELOW, a WARNING below it (with the count,
the shapes missing and where their untuned CSV was written; the exit code stays 0), failed below --min-coverage.
"""

from __future__ import annotations

from validation.aiterpkg.tuned_csv import (
    COVERAGE_WARN_BELOW,
    CsvError,
    coverage,
    index,
    tuned_paths,
    write_untuned,
)
from validation.checks.context import Context
from validation.checks.report import FAILED, PASSED, WARNING, Case, CheckResult
from validation.core.models import M_BUCKETS, gemm_shapes, load_config

NAME = "tuned-csv-coverage"
SHOW_MISSING = 5


def run(ctx: Context) -> CheckResult:
    paths, source = tuned_paths(ctx.tuned_csv, ctx.aiter_root)
    if not paths:
        return CheckResult(NAME, "skipped", "aiter not installed and no --tuned-csv / AITER_CONFIG_GEMM_BF16")
    cu = ctx.cu_num or ctx.arch.default_cu_num
    metrics = {"csv": [str(p) for p in paths], "source": source, "gfx": ctx.arch.name, "cu_num": cu,
               "m_buckets": list(M_BUCKETS)}
    try:
        table = index(paths, ctx.arch.name, cu)
    except CsvError as e:
        return CheckResult(NAME, "failed", str(e), metrics=metrics)
    name, cfg = load_config(ctx.model)
    metrics.update(model=name, rows_for_target=len(table))
    unique, cases, per_tp = _gaps_per_tp(ctx, cfg, table, cu, metrics)
    metrics["missing"] = len(unique)
    written = None
    if ctx.write_untuned is not None and unique:
        write_untuned(ctx.write_untuned, unique)
        written = metrics["untuned_csv"] = str(ctx.write_untuned)
    where = f"untuned CSV of the {len(unique)} missing shapes: " + (
        written or "not written (pass --write-untuned PATH)")
    for tp, total, gaps in per_tp:
        cases.append(_case(ctx, tp, total, gaps, cu, where))
    metrics["warn_below"] = COVERAGE_WARN_BELOW
    return CheckResult.from_cases(NAME, cases, metrics)


def _gaps_per_tp(ctx: Context, cfg: dict, table, cu: int, metrics: dict):
    cases, per_tp, every = [], [], {}
    for tp in ctx.tp:
        try:
            shapes = gemm_shapes(cfg, tp)
        except (KeyError, ValueError) as e:
            cases.append(Case.verdict(f"tp{tp}", False, "tuned-csv", f"cannot derive shapes: {e}"))
            continue
        total, gaps = coverage(shapes, M_BUCKETS, table, cu)
        every.update({(g.M, g.N, g.K): g for g in gaps})
        frac = (total - len(gaps)) / total if total else 1.0
        metrics[f"tp{tp}"] = {"shapes": total, "covered": total - len(gaps), "coverage": round(frac, 4),
                              "status": coverage_status(frac, ctx.min_coverage)}
        per_tp.append((tp, total, gaps))
    return sorted(every.values(), key=lambda g: (g.N, g.K, g.M)), cases, per_tp


def coverage_status(frac: float, min_coverage: float) -> str:
    """failed below --min-coverage, warning below the documented threshold, else passed."""
    if frac < min_coverage:
        return FAILED
    return WARNING if frac < COVERAGE_WARN_BELOW else PASSED


def _case(ctx: Context, tp: int, total: int, gaps: list, cu: int, where: str) -> Case:
    frac = (total - len(gaps)) / total if total else 1.0
    status = coverage_status(frac, ctx.min_coverage)
    note = f"{total - len(gaps)}/{total} shapes covered ({frac:.1%}) for {ctx.arch.name} cu_num {cu}"
    if gaps:
        shown = ", ".join(f"{g.layer} M={g.M} N={g.N} K={g.K}" for g in gaps[:SHOW_MISSING])
        more = f" (+{len(gaps) - SHOW_MISSING} more)" if len(gaps) > SHOW_MISSING else ""
        note += f"; missing {shown}{more}; {where}"
    if status == WARNING:
        note += f"; below the {COVERAGE_WARN_BELOW:.0%} warning threshold"
    elif status == FAILED:
        note += f"; below --min-coverage {ctx.min_coverage:.0%}"
    return Case(f"tp{tp}", status, backend="tuned-csv", note=note)
