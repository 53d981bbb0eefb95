"""ASM GEMM: on gfx950 it must be unreachable through the tuned-GEMM entry, or proven correct on the GPU.

asm reaches aiter's dispatcher two ways: a tuned CSV row, or the default for pre-shuffled weights on every
arch but gfx942. Where aiter runs (an AMD GPU), its own lookup is asked and asm shapes are run. Elsewhere its
lookup is executed with its runtime stubbed (validation.aiterpkg.tuned_lookup), for the target arch: on gfx950 every
answer must be something other than asm (the build's no-asm-gemm-gfx950 patch turns asm into hipBLASLt).
"""

from __future__ import annotations

from dataclasses import astuple

import torch

from validation.aiterpkg import gemm_dispatch, tuned_lookup
from validation.aiterpkg.gemm_dispatch import Call
from validation.aiterpkg.locate import try_import
from validation.aiterpkg.tuned_csv import CsvError, Key, index, tuned_paths
from validation.checks.common import Shape, operands, reference
from validation.checks.context import Context
from validation.checks.gemm_hipblaslt import UNTUNED_PRESHUFFLED, untuned_libtypes
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult

NAME = "gemm-asm"
MAX_PROOF_SHAPES = 4
MAX_ASKED_ROWS = 20  # tuned asm rows put to the executed lookup: ~1 ms each, a sample keeps the report short
NO_ASM_ARCH = "gfx950"
# aiter's lookup key (set_index in get_GEMM_A16W16_config_); every other column comes back in the config.
KEY_COLUMNS = frozenset({"gfx", "cu_num", "M", "N", "K", "bias", "dtype", "outdtype", "scaleAB", "bpreshuffle"})


def run(ctx: Context) -> CheckResult:
    if ctx.aiter_root is None:
        return CheckResult.from_cases(NAME, [Case.skipped("asm", "asm", "aiter not installed and no --aiter-src")])
    cu = ctx.cu_num or ctx.arch.default_cu_num
    paths, source = tuned_paths(ctx.tuned_csv, ctx.aiter_root)
    try:
        table = index(paths, ctx.arch.name, cu)
    except CsvError as e:
        return CheckResult.from_cases(NAME, [Case.verdict("tuned-csv", False, "asm", str(e))])
    asm = {k: row for k, row in table.items() if row.get("libtype") == "asm"}
    metrics = {"asm_rows": len(asm), "cu_num": cu, "csv_source": source}
    note = f"{len(asm)} asm rows for cu_num {cu} in {source}"
    if ctx.aiter_on_gpu is None:
        return _on_gpu(ctx, list(asm), metrics, note)
    if ctx.arch.name == NO_ASM_ARCH:
        return CheckResult.from_cases(NAME, _executed_no_asm(ctx, cu, asm, paths, note), metrics)
    return _executed_asm_allowed(ctx, cu, asm, metrics, note)


def _on_gpu(ctx: Context, asm: list[Key], metrics: dict, note: str) -> CheckResult:
    """aiter runs here: its own lookup says what untuned shapes get; asm shapes run on the GPU."""
    tg, err = try_import("aiter.tuned_gemm")
    if tg is None:
        return CheckResult.from_cases(NAME, [Case.verdict("asm", False, "asm", err)], metrics)
    fn = tg.get_GEMM_A16W16_config
    fallback = untuned_libtypes(lambda *a, **kw: tuned_lookup.call(fn, *a, **kw),
                                tuned_lookup.accepts(fn, "bpreshuffle"))
    metrics["fallback_libtypes"] = sorted(set(fallback.values()))
    note += f"; untuned defaults {_said(fallback)}"
    if not asm and "asm" not in fallback.values():
        return CheckResult.from_cases(NAME, [Case.verdict("asm-reachable", True, "asm", "unreachable: " + note)],
                                      metrics)
    return CheckResult.from_cases(NAME, _prove(ctx, tg, asm[:MAX_PROOF_SHAPES]), metrics)


def _executed_asm_allowed(ctx: Context, cu: int, asm: dict, metrics: dict, note: str) -> CheckResult:
    """Not gfx950: asm is allowed, so reachable asm is a skip until the GPU proves it (what aiter can't do here)."""
    try:
        with tuned_lookup.load(ctx.aiter_root, ctx.arch.name, cu) as lookup:
            fallback = untuned_libtypes(lookup.config, lookup.accepts("bpreshuffle"))
            where = lookup.describe()
    except tuned_lookup.AiterLookupError as e:
        return CheckResult.from_cases(NAME, [Case.verdict("asm-reachable", False, "aiter-executed", str(e))],
                                      metrics)
    metrics["fallback_libtypes"] = sorted(set(fallback.values()))
    note += f"; untuned defaults {_said(fallback)} ({where}, no tuned CSV)"
    if not asm and "asm" not in fallback.values():
        case = Case.verdict("asm-reachable", True, "aiter-executed", "unreachable: " + note)
    else:
        case = Case.skipped("asm-reachable", "asm", f"ASM enabled on {ctx.arch.name} ({note}); proving it correct "
                            f"needs the GPU: {ctx.aiter_on_gpu}")
    return CheckResult.from_cases(NAME, [case], metrics)


def _executed_no_asm(ctx: Context, cu: int, asm: dict, paths, note: str) -> list[Case]:
    """gfx950 without aiter on a GPU: aiter's executed lookup must answer something else than asm, for the
    untuned defaults and for a sample of the tuned asm rows (those need pandas, as aiter reads CSVs with it)."""
    try:
        with tuned_lookup.load(ctx.aiter_root, ctx.arch.name, cu) as lookup:
            answers = untuned_libtypes(lookup.config, lookup.accepts("bpreshuffle"))
            where = lookup.describe()
    except tuned_lookup.AiterLookupError as e:
        return [Case.verdict("asm-reachable", False, "aiter-executed", str(e))]
    cases, asked = [], f"untuned defaults (no tuned CSV) {_said(answers)}"
    sample = _sample(asm, MAX_ASKED_ROWS)
    if sample and not tuned_lookup.pandas_available():
        cases.append(Case.skipped("asm-reachable tuned rows", "aiter-executed",
                                  f"pandas is not installed: aiter reads its tuned CSV with pandas, so its "
                                  f"lookup was not asked about the {note}"))
    elif sample:
        try:
            answers.update(_ask_tuned_rows(ctx, cu, sample, paths))
        except tuned_lookup.AiterLookupError as e:
            return [Case.verdict("asm-reachable", False, "aiter-executed", f"{e} ({note}); {where}")]
        asked += (f"; tuned asm rows (with the tuned CSVs, {len(paths)} files): {len(sample)} sampled of "
                  f"{len(asm)} ({note})")
    bad = [q for q, lib in answers.items() if lib == "asm"]
    verdict = (f"asm returned for {bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else "")
               if bad else f"no lookup returned asm ({len(answers)} asked)")
    cases.insert(0, Case.verdict("asm-reachable", not bad, "aiter-executed",
                                 f"{verdict}; {asked}; {where}; aiter itself not run ({ctx.aiter_on_gpu})"))
    return cases + [_dispatched_no_asm(ctx, cu, sample if tuned_lookup.pandas_available() else [], paths)]


def _dispatched_no_asm(ctx: Context, cu: int, sample: list[tuple[Key, dict]], paths) -> Case:
    """The dispatcher ATOM calls (tgemm.mm), executed for the untuned pre-shuffled default and the sampled
    tuned asm rows: no call may reach aiter's asm entry point (validation.aiterpkg.gemm_dispatch)."""
    calls = [Call(*UNTUNED_PRESHUFFLED, preshuffled=True)] + [_call(k, row) for k, row in sample]
    kernels = gemm_dispatch.StubbedKernels()
    reached: dict[str, list[str]] = {}
    try:
        with tuned_lookup.load(ctx.aiter_root, ctx.arch.name, cu, paths if sample else (), kernels) as lookup:
            for call in calls:
                if call.preshuffled and not lookup.accepts("bpreshuffle"):
                    continue
                for b in gemm_dispatch.run_stubbed(lookup.module, kernels, call).backends():
                    reached.setdefault(b, []).append(call.label)
    except Exception as e:  # noqa: BLE001 - aiter's dispatcher failing is the finding
        return Case.verdict("asm-dispatch", False, "aiter-dispatch", f"tgemm.mm failed: {type(e).__name__}: {e}")
    said = ", ".join(f"{b} x{len(v)}" for b, v in reached.items())
    asm = reached.get(gemm_dispatch.ASM, [])
    note = (f"asm reached by {asm[0]}" + (f" and {len(asm) - 1} more" if len(asm) > 1 else "") if asm
            else "asm never reached") + f"; {len(calls)} tgemm.mm calls reached {said} (aiter's runtime stubbed)"
    return Case.verdict("asm-dispatch", not asm, "aiter-dispatch:" + "+".join(reached), note)


def _call(k: Key, row: dict) -> Call:
    dtype = getattr(torch, k.dtype.removeprefix("torch."))
    return Call(k.M, k.N, k.K, dtype=dtype, otype=getattr(torch, k.outdtype.removeprefix("torch.")), bias=k.bias,
                preshuffled=_preshuffled(row), scaled=k.scaleAB)


def _ask_tuned_rows(ctx: Context, cu: int, sample: list[tuple[Key, dict]], paths) -> dict[str, str]:
    """{row: libtype} from the lookup executed with the tuned CSVs. A row it does not find is an error: its
    answer would be the default, which says nothing about the row."""
    with tuned_lookup.load(ctx.aiter_root, ctx.arch.name, cu, paths) as lookup:
        tuned = {_label(k, row): (lookup.config(**_query(k, row)), row) for k, row in sample}
    missed = [q for q, (cfg, row) in tuned.items() if not _from_row(cfg, row)]
    if missed:
        raise tuned_lookup.AiterLookupError(
            f"the executed lookup did not find {missed[0]} in the tuned CSVs ({len(missed)} of {len(tuned)} "
            "missed) and answered its default: nothing is proven about the tuned rows")
    return {q: cfg.get("libtype") for q, (cfg, _) in tuned.items()}


def _sample(asm: dict[Key, dict], n: int) -> list[tuple[Key, dict]]:
    """Up to n rows: the first of every kind (bias, dtypes, scaleAB, bpreshuffle), then evenly spread."""
    rows = sorted(asm.items(), key=lambda kr: astuple(kr[0]))
    firsts: dict[tuple, tuple[Key, dict]] = {}
    for k, row in rows:
        firsts.setdefault((k.bias, k.dtype, k.outdtype, k.scaleAB, _preshuffled(row)), (k, row))
    picked = dict(firsts.values())
    for k, row in (rows[i * len(rows) // n] for i in range(n if rows else 0)):
        if len(picked) >= n:
            break
        picked.setdefault(k, row)
    return list(picked.items())[:n]


def _preshuffled(row: dict) -> bool:
    return row.get("bpreshuffle", "False").strip().lower() in ("true", "1")


def _from_row(cfg: dict, row: dict) -> bool:
    """aiter returned the tuned row (every column outside its lookup key), not a default config."""
    return all(c in cfg for c in row if c not in KEY_COLUMNS)


def _query(k: Key, row: dict) -> dict:
    return {"M": k.M, "N": k.N, "K": k.K, "bias": k.bias, "dtype": k.dtype, "otype": k.outdtype,
            "scaleAB": k.scaleAB, "bpreshuffle": _preshuffled(row)}


def _label(k: Key, row: dict) -> str:
    return (f"tuned row M={k.M} N={k.N} K={k.K} bias={k.bias} {k.dtype}->{k.outdtype} "
            f"bpreshuffle={_preshuffled(row)}")


def _said(answers: dict[str, str]) -> str:
    return ", ".join(f"{q} -> {lib!r}" for q, lib in answers.items())


def _prove(ctx: Context, tg, keys) -> list[Case]:
    cases = []
    for k in keys:
        s = Shape("asm_row", k.M, k.N, k.K)
        a, w = operands(ctx, s)
        out = tg.gemm_a16w16(a, w, otype=getattr(torch, k.outdtype.removeprefix("torch.")))
        cases.append(Case.measured(s.label, compare(out, reference(a, w)), "aiter:asm"))
    return cases
