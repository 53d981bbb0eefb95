"""Tuned-CSV coverage of a model's GEMM shapes at the asked TP sizes, as aiter would look them up.

A share covered below validation.aiterpkg.tuned_csv.COVERAGE_WARN_BELOW at any TP size is a WARNING (never PRESENT:
the exit code stays 0), as in validation's tuned-csv-coverage check. Reuses validation.aiterpkg.tuned_csv (aiter's CSV conventions, AITER_CONFIG_GEMM_BF16 included) and validation.core.models
(shapes per TP from a config.json or a preset). Missing shapes are listed and, when asked, written in aiter's
untuned-CSV format so they can be tuned.
"""

from __future__ import annotations

import os

from validation.aiterpkg.tuned_csv import (
    COVERAGE_WARN_BELOW,
    CsvError,
    coverage,
    index,
    tuned_paths,
    write_untuned,
)
from validation.core.archs import ARCHS
from validation.core.models import M_BUCKETS, gemm_shapes, load_config
from validation.probes import pyenv
from validation.probes.image import OK, UNKNOWN, WARNING, Finding, Image

SHOW = 4


def tuned_csv_coverage(ctx: Image) -> Finding | None:
    if not ctx.model:
        return None
    f = Finding("tuned-csv-coverage", f"tuned GEMM CSV covers at least {COVERAGE_WARN_BELOW:.0%} of the model's "
                f"shapes at tp {','.join(map(str, ctx.tp))}", UNKNOWN,
                fix="tune the missing shapes (aiter's GEMM tuner reads the untuned CSV the audit writes) and add them")
    aiter = pyenv.locate(ctx, "aiter")
    table, where = _table(ctx, f, aiter.path if aiter else None)
    if table is None:
        return f
    try:
        name, cfg = load_config(ctx.model)
    except (OSError, ValueError) as exc:
        f.evidence.append(f"cannot read --model: {exc}")
        return f
    cu = _cu_num(ctx)
    gaps, failed, worst = _gaps(f, name, cfg, ctx.tp, table, cu)
    f.status = WARNING if worst < COVERAGE_WARN_BELOW else UNKNOWN if failed else OK
    if ctx.untuned_csv is not None and gaps:
        write_untuned(ctx.untuned_csv, gaps)
        f.evidence.append(f"untuned CSV with {len(gaps)} shapes written to {ctx.untuned_csv}")
    elif gaps:
        f.evidence.append(f"untuned CSV of the {len(gaps)} missing shapes not written (pass --untuned-csv PATH)")
    f.evidence.append(where)
    return f


def _table(ctx: Image, f: Finding, aiter_path):
    if ctx.arch is None:
        f.evidence.append(f"target arch unknown ({ctx.arch_source}): the CSV is keyed by gfx and cu_num")
        return None, ""
    saved = os.environ.get("AITER_CONFIG_GEMM_BF16")
    env_value = ctx.env.get("AITER_CONFIG_GEMM_BF16")
    try:  # tuned_paths reads the process environment; give it the image's
        _setenv("AITER_CONFIG_GEMM_BF16", env_value)
        paths, source = tuned_paths(None, aiter_path)
    finally:
        _setenv("AITER_CONFIG_GEMM_BF16", saved)
    if not paths:
        f.evidence.append("aiter not found and AITER_CONFIG_GEMM_BF16 unset: no tuned CSV to read")
        return None, ""
    paths = [ctx.path(str(p)) if env_value else p for p in paths]
    where = f"CSVs ({source}): {', '.join(ctx.shown(p) for p in paths)}"
    try:
        return index(paths, ctx.arch), where  # every cu_num: a CU_NUM override still finds its rows
    except CsvError as exc:
        f.evidence += [str(exc), where]
        return None, ""


def _setenv(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _cu_num(ctx: Image) -> int:
    raw = ctx.env.get("CU_NUM", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else ARCHS[ctx.arch].default_cu_num


def _gaps(f: Finding, name: str, cfg: dict, tps: tuple[int, ...], table, cu: int) -> tuple[list, int, float]:
    """(every missing shape, TP sizes whose shapes could not be derived, the lowest share covered)."""
    every, failed, worst = {}, 0, 1.0
    for tp in tps:
        try:
            shapes = gemm_shapes(cfg, tp)
        except (KeyError, ValueError) as exc:
            f.evidence.append(f"{name} tp{tp}: cannot derive shapes: {exc}")
            failed += 1
            continue
        total, gaps = coverage(shapes, M_BUCKETS, table, cu)
        every.update({(g.M, g.N, g.K): g for g in gaps})
        worst = min(worst, (total - len(gaps)) / total if total else 1.0)
        shown = "; ".join(f"{g.layer} M={g.M} N={g.N} K={g.K}" for g in gaps[:SHOW])
        f.evidence.append(f"{name} tp{tp}: {total - len(gaps)}/{total} shapes tuned for cu_num {cu}"
                          + (f"; missing {shown}" + (f" (+{len(gaps) - SHOW} more)" if len(gaps) > SHOW else "") if gaps else ""))
    return sorted(every.values(), key=lambda g: (g.N, g.K, g.M)), failed, worst
