"""A model's GEMM shapes per TP size and token bucket, looked up in aiter's tuned bf16 CSVs."""

from __future__ import annotations

from validation.checks.context import Context
from validation.models import M_BUCKETS, gemm_shapes, load_config
from validation.report import Case, CheckResult
from validation.tuned_csv import CsvError, coverage, index, tuned_paths, write_untuned

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
    cases, all_gaps = [], []
    for tp in ctx.tp:
        try:
            shapes = gemm_shapes(cfg, tp)
        except (KeyError, ValueError) as e:
            cases.append(Case.verdict(f"tp{tp}", False, "tuned-csv", f"cannot derive shapes: {e}"))
            continue
        total, gaps = coverage(shapes, M_BUCKETS, table, cu)
        all_gaps += gaps
        frac = (total - len(gaps)) / total if total else 1.0
        metrics[f"tp{tp}"] = {"shapes": total, "covered": total - len(gaps), "coverage": round(frac, 4)}
        shown = ", ".join(f"{g.layer} M={g.M} N={g.N} K={g.K}" for g in gaps[:SHOW_MISSING])
        note = f"{total - len(gaps)}/{total} covered ({frac:.1%}) for {ctx.arch.name} cu_num {cu}"
        note += f"; missing e.g. {shown}" if gaps else ""
        cases.append(Case.verdict(f"tp{tp}", frac >= ctx.min_coverage, "tuned-csv", note))
    unique = sorted({(g.M, g.N, g.K): g for g in all_gaps}.values(), key=lambda g: (g.N, g.K, g.M))
    metrics["missing"] = len(unique)
    if ctx.write_untuned is not None:
        write_untuned(ctx.write_untuned, unique)
        metrics["untuned_csv"] = str(ctx.write_untuned)
    return CheckResult.from_cases(NAME, cases, metrics)

