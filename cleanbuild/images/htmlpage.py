"""report.html: the build's (or the audit's) report as one page a browser opens with no network.

Rendered from the very dict report.json is written from, through Jinja2 with autoescape on: every string from an
image, a label or a log is escaped. CSS and the charts (SVG) are inline; the page has no script, and its
Content-Security-Policy forbids one. The geometry of the charts is computed here, so the templates only draw.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from cleanbuild.images.plan import CLEAN_UNITS

WIDTH = 760  # the bars' share of a chart (px in the SVG's viewBox); labels take LABEL px to their left
LABEL = 210
ROW = 20
# What each unit's layers hold, for the layer chart (cleanbuild.images.components names the units).
HOLDS = {"base": "base image", "venv": "venv: Python, torch, deps", "atom-layer": "ATOM", "clean": "aiter + runtime",
         "candidate": "patches", "dev": "--src overlay"}
UNIT_STEP = {"candidate": "patch", "dev": "dev", **{name: "clean" for name in CLEAN_UNITS}}  # else: wheels


@functools.cache
def _env() -> jinja2.Environment:
    # Chainable: a report.json of an older schema (no layer_sizes, no pins) renders with those parts empty.
    return jinja2.Environment(loader=jinja2.PackageLoader("cleanbuild", "templates"), autoescape=True,
                              undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)


def build_page(data: dict[str, Any], bom: dict[str, Any] | None = None) -> str:
    """The build report (build-clean, promote, a failed run): data is report.json's dict, bom its sbom.cdx.json."""
    return _env().get_template("report.html.j2").render(
        d=data, timeline=timeline(data), layers=layer_chart(data), validation=validation_view(data.get("validation")),
        sbom=sbom_rows(bom), mib=mib, ROW=ROW, LABEL=LABEL, WIDTH=WIDTH)


def audit_page(data: dict[str, Any]) -> str:
    """`invoke audit --report`: data is report.json's dict (cleanbuild.commands.audit_report.AuditResult.to_json)."""
    device = (data.get("device") or {}).get("report") or None
    return _env().get_template("audit.html.j2").render(
        d=data, layers=layer_chart(data), validation=validation_view(device), mib=mib, ROW=ROW, LABEL=LABEL, WIDTH=WIDTH)


def mib(size: float | None) -> str:
    if size is None:
        return "-"
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"


def _how(unit: dict[str, Any]) -> str:
    """built | local | registry: where a unit's image came from."""
    if unit["status"] != "reused":
        return "built"
    return "registry" if "registry" in unit.get("how", "") else "local"


def timeline(data: dict[str, Any]) -> dict[str, Any]:
    """Every step, and under it every unit it made or reused, as bars on one time axis.

    Steps run one after another, so the critical path is the whole chain of steps: its length is the sum of their
    seconds. The longest link is marked. A unit's bar starts where the report says it began (start_s: the units of
    a step build at once where they can); a report without it lays the units end to end."""
    steps = data.get("steps") or []
    units = data.get("units") or []
    chain = sum(s["seconds"] for s in steps)
    scale = WIDTH / max(chain, data.get("total_seconds") or 0, 1e-9)
    rows, at = [], 0.0
    longest = max(steps, key=lambda s: s["seconds"])["name"] if steps else None
    for step in steps:
        rows.append({"kind": "step", "name": step["name"], "status": step["status"], "seconds": step["seconds"],
                     "x": at * scale, "w": max(step["seconds"] * scale, 1.0), "detail": step.get("detail") or "",
                     "longest": step["name"] == longest})
        inner = at
        for unit in (u for u in units if UNIT_STEP.get(u["name"], "wheels") == step["name"]):
            seconds = unit.get("seconds") or 0.0
            began = unit.get("start_s")
            rows.append({"kind": "unit", "name": unit["name"], "status": _how(unit), "seconds": seconds,
                         "x": (inner if began is None else began) * scale, "w": max(seconds * scale, 1.0), "detail": unit.get("how") or "",
                         "longest": False})
            inner += seconds
        at += step["seconds"]
    for i, row in enumerate(rows):
        row["y"] = i * ROW
    ticks = _ticks(max(chain, data.get("total_seconds") or 0), scale)
    return {"rows": rows, "chain": round(chain, 1), "longest": longest, "height": len(rows) * ROW,
            "total": data.get("total_seconds"), "ticks": ticks,
            "path": [s["name"] for s in steps]}


def _ticks(span: float, scale: float) -> list[dict[str, Any]]:
    """About six round-numbered marks along the time axis."""
    if span <= 0:
        return []
    step = next((s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600) if span / s <= 6), 3600)
    return [{"x": t * scale, "label": f"{t} s"} for t in range(0, int(span) + 1, step)]


def layer_chart(data: dict[str, Any], shown: int = 14) -> dict[str, Any]:
    """The image's layers as bars, largest first, each named by the image that first holds it (base, venv, ATOM,
    aiter, patches) and, where an earlier release is known, whether its bytes are new since that release."""
    sizes = data.get("layer_sizes") or []
    since = data.get("since_previous") or {}
    new = set(since.get("new_digests") or [])
    rows = [{"holds": HOLDS.get(s.get("unit", ""), s.get("unit", "")), "size": s["size"],
             "created_by": s.get("created_by") or "(imported, no command)", "new": bool(since) and s.get("digest") in new, "index": i}
            for i, s in enumerate(sizes)]
    if not rows:  # audit, or a report written before layer_sizes: the engine's largest layers
        rows = [{"holds": "", "size": s["size"], "created_by": s.get("created_by") or "", "new": False, "index": None}
                for s in data.get("largest_layers") or []]
    rows.sort(key=lambda r: r["size"], reverse=True)
    top = max((r["size"] for r in rows), default=0) or 1
    kept, rest = rows[:shown], rows[shown:]
    for i, row in enumerate(kept):
        row.update(y=i * ROW, w=max(row["size"] / top * WIDTH * 0.8, 1.0))
    groups: dict[str, int] = {}
    for s in sizes:
        holds = HOLDS.get(s.get("unit", ""), s.get("unit", ""))
        groups[holds] = groups.get(holds, 0) + s["size"]
    return {"rows": kept, "rest": len(rest), "rest_bytes": sum(r["size"] for r in rest), "height": len(kept) * ROW,
            "groups": sorted(groups.items(), key=lambda g: g[1], reverse=True), "since": since or None,
            "total": sum(s["size"] for s in sizes)}


def validation_view(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The validation report (validation.checks.report.Report's JSON): its checks and cases, and the tuned-CSV coverage
    per tensor-parallel size as bars against the warning threshold."""
    if not report:
        return None
    coverage = []
    for check in report.get("checks", []):
        metrics = check.get("metrics") or {}
        for key, tp in metrics.items():
            if key.startswith("tp") and isinstance(tp, dict) and "shapes" in tp:
                coverage.append({"tp": key, "shapes": tp["shapes"], "covered": tp["covered"],
                                 "share": tp.get("coverage", 0.0), "status": tp.get("status", ""),
                                 "model": metrics.get("model"), "warn_below": metrics.get("warn_below")})
    for i, row in enumerate(coverage):
        row.update(y=i * ROW, w=max(row["share"] * WIDTH, 1.0))
    warn = next((c["warn_below"] for c in coverage if c["warn_below"] is not None), None)
    return {"report": report, "checks": report.get("checks", []), "coverage": coverage,
            "coverage_height": len(coverage) * ROW, "warn_x": warn * WIDTH if warn is not None else None, "warn": warn}


def sbom_rows(bom: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The SBOM's components (CycloneDX 1.6 JSON): name, version, package URL and role."""
    rows = []
    for comp in (bom or {}).get("components", []):
        props = {p.get("name", "").rsplit(":", 1)[-1]: p.get("value") for p in comp.get("properties", [])}
        rows.append({"name": comp.get("name"), "version": comp.get("version"), "purl": comp.get("purl") or "",
                     "role": props.get("role") or props.get("component") or comp.get("type", "")})
    return rows
