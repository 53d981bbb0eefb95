"""Results: cases and checks, the JSON the host pipeline reads, and a table for people."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from validation.checks.metrics import Comparison

PASSED, FAILED, SKIPPED, WARNING = "passed", "failed", "skipped", "warning"
# Every status a case or check can have. WARNING: it ran and found something to act on that is not a failure
# (tuned-CSV coverage below validation.aiterpkg.tuned_csv.COVERAGE_WARN_BELOW); it never changes the exit code.
STATUSES = (PASSED, WARNING, FAILED, SKIPPED)


@dataclass
class Case:
    name: str
    status: str
    cosine: float = 0.0
    max_abs_err: float = 0.0
    frac_out_of_tol: float = 0.0
    nan_inf: bool = False
    backend: str = ""
    note: str = ""

    @classmethod
    def measured(cls, name: str, cmp: Comparison, backend: str, note: str = "") -> Case:
        why = cmp.why()
        note = "; ".join(x for x in (note, why) if x)
        status = PASSED if cmp.passed else FAILED
        return cls(name, status, cmp.cosine, cmp.max_abs_err, cmp.frac_out_of_tol, cmp.nan_inf, backend, note)

    @classmethod
    def skipped(cls, name: str, backend: str, reason: str) -> Case:
        return cls(name, SKIPPED, backend=backend, note=reason)

    @classmethod
    def verdict(cls, name: str, ok: bool, backend: str, note: str) -> Case:
        """A case without numbers (a lookup, a config): pass or fail, and why."""
        return cls(name, PASSED if ok else FAILED, backend=backend, note=note)

    @classmethod
    def warning(cls, name: str, backend: str, note: str) -> Case:
        return cls(name, WARNING, backend=backend, note=note)


@dataclass
class CheckResult:
    name: str
    status: str
    reason: str = ""
    wall_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)

    @classmethod
    def from_cases(cls, name: str, cases: list[Case], metrics: dict | None = None) -> CheckResult:
        """Failed if any case failed, else warning if any warned; skipped only if every case skipped; a skip
        never counts as a pass."""
        failed = [c.name for c in cases if c.status == FAILED]
        warned = [c for c in cases if c.status == WARNING]
        ran = [c for c in cases if c.status != SKIPPED]
        if failed:
            status, reason = FAILED, "failed: " + _first_of([c for c in cases if c.status == FAILED])
        elif warned:
            status, reason = WARNING, "warning: " + _first_of(warned)
        elif not ran:
            status = SKIPPED
            reason = "; ".join(sorted({c.note for c in cases})) or "no cases"
        else:
            status = PASSED
            n_skip = len(cases) - len(ran)
            reason = f"{len(ran)} cases passed" + (f", {n_skip} skipped" if n_skip else "")
        return cls(name, status, reason, metrics={**_summary(cases), **(metrics or {})}, cases=cases)


def _first_of(cases: list[Case]) -> str:
    """One line: the first case, what its note says first, and how many more there are."""
    first = cases[0]
    said = first.note.split("; ")[0]
    more = f" (+{len(cases) - 1} more: {', '.join(c.name for c in cases[1:4])}{', ...' if len(cases) > 4 else ''})"
    return f"{first.name}" + (f": {said}" if said else "") + (more if len(cases) > 1 else "")


def _summary(cases: list[Case]) -> dict[str, Any]:
    """Worst numbers over the cases that measured something (verdict-only cases carry none)."""
    measured = [c for c in cases if c.status != SKIPPED and (c.cosine or c.max_abs_err)]
    if not measured:
        return {}
    return {"measured_cases": len(measured), "min_cosine": min(c.cosine for c in measured),
            "max_abs_err": max(c.max_abs_err for c in measured),
            "max_frac_out_of_tol": max(c.frac_out_of_tol for c in measured),
            "any_nan_inf": any(c.nan_inf for c in measured)}


@dataclass
class Report:
    arch: str
    device: str
    device_name: str
    torch: str
    triton: str | None
    aiter: str | None
    aiter_commit: str | None = None  # the aiter commit the checks ran (checkout HEAD, or the install's record)
    aiter_source: str | None = None  # the aiter package folder they ran from (--aiter-src, or the install)
    wall_s: float = 0.0
    exit_code: int = 0
    checks: list[CheckResult] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(_finite(asdict(self)), indent=2, allow_nan=False)


def _finite(obj: Any) -> Any:
    """JSON has no NaN/Inf; the failing status already says what went wrong."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else (-1.0 if math.isnan(obj) else math.copysign(1e308, obj))
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def exit_code(checks: list[CheckResult]) -> int:
    """1 if a check failed; a warning or a skip leaves it 0."""
    return 1 if any(c.status == FAILED for c in checks) else 0


def _rows(report: Report) -> list[tuple[str, ...]]:
    rows = []
    for chk in report.checks:
        rows.append((chk.name, chk.status.upper(), f"{chk.wall_s:.2f}", "", "", "", chk.reason))
        for c in chk.cases:
            nums = c.status != SKIPPED and (c.cosine or c.max_abs_err)
            rows.append((
                "  " + c.name, c.status, "", f"{c.cosine:.6f}" if nums else "",
                f"{c.max_abs_err:.3g}" if nums else "", c.backend, c.note,
            ))
    return rows


HEADER = ("check / case", "status", "wall s", "cosine", "max abs err", "backend", "note")


def render(report: Report) -> str:
    head = (f"validation: arch {report.arch}, device {report.device} ({report.device_name}), "
            f"torch {report.torch}, triton {report.triton}, aiter {report.aiter} (commit {report.aiter_commit}, "
            f"from {report.aiter_source}), {report.wall_s:.1f} s")
    try:
        return head + "\n" + _render_rich(report)
    except ImportError:
        return head + "\n" + _render_plain(report)


def _render_rich(report: Report) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(*HEADER)
    colour = {"PASSED": "green", "FAILED": "red", "SKIPPED": "yellow", "WARNING": "magenta"}
    for row in _rows(report):
        style = colour.get(row[1], "")
        table.add_row(*row[:1], f"[{style}]{row[1]}[/]" if style else row[1], *row[2:])
    console = Console(width=160, record=True, force_terminal=False)
    with console.capture() as cap:
        console.print(table)
    return cap.get()


def _render_plain(report: Report) -> str:
    rows = [HEADER, *_rows(report)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    return "\n".join(lines)
