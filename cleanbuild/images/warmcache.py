"""The candidate's Triton cache as the report shows it: the manifest the warm step wrote into the image
(/opt/atom-build/triton-cache.json, validation.tritoncache), the warm step's own seconds from the build's log (a
reused candidate has none: it was compiled by an earlier build), and what validation's first-use-compile found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The line validation.tritoncache warm prints for the host (its RUN_LINE): seconds and processes of this build.
RUN_LINE = "atom-build-warm-run:"


def run_facts(log: Path) -> dict[str, Any] | None:
    """The warm step's own facts from a build log, or None (no log: the candidate was reused)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if RUN_LINE in line:
            try:
                facts = json.loads(line.split(RUN_LINE, 1)[1])
            except ValueError:
                return None
            return facts if isinstance(facts, dict) else None
    return None


def section(manifest: dict[str, Any] | None, run: dict[str, Any] | None,
            validation: dict[str, Any] | None) -> dict[str, Any]:
    """The report's triton_cache: kernels compiled ahead, bytes per arch, seconds, and compiles at first use."""
    first = _first_use(validation)
    if not manifest:
        return {"present": False, "first_use": first,
                "note": "no Triton cache in this image: every Triton kernel compiles at its first call"}
    cache = manifest.get("cache") or {}
    return {"present": True, "target": manifest.get("target"), "triton": manifest.get("triton"),
            "models": manifest.get("models"), "tp": manifest.get("tp"), "calls": manifest.get("calls"),
            "kernels": manifest.get("kernels"), "bytes": cache.get("bytes"), "by_arch": cache.get("by_arch"),
            "stubs": manifest.get("stubs"), "seconds": (run or {}).get("seconds"), "jobs": (run or {}).get("jobs"),
            "compiled_here": (run or {}).get("kernels_compiled"),
            "not_planned": [n for p in manifest.get("plans") or [] for n in p.get("not_planned") or []],
            "first_use": first}


def _first_use(validation: dict[str, Any] | None) -> dict[str, Any] | None:
    """first-use-compile's verdict: its status, the kernels that would compile, and the replay's figures."""
    check = next((c for c in (validation or {}).get("checks", []) if c.get("name") == "first-use-compile"), None)
    if check is None:
        return None
    result = (check.get("metrics") or {}).get("triton_cache") or {}
    return {"status": check.get("status"), "reason": check.get("reason"),
            "compiles": result.get("compiled_at_first_use"), "kernels": result.get("kernels")}


def markdown(data: dict[str, Any] | None) -> list[str]:
    if not data:
        return []
    first = data.get("first_use") or {}
    compiles = first.get("compiles")
    said = ("not checked" if first.get("status") is None else
            f"{len(compiles)}: {', '.join(compiles[:10])}" if compiles else "0")
    lines = ["", "## Triton cache", ""]
    if not data.get("present"):
        return lines + [f"- {data['note']}", f"- compiles at first use: {said}"]
    by_arch = ", ".join(f"{a} {r['files']} code objects {r['bytes'] / 2**20:.1f} MiB"
                        for a, r in (data.get("by_arch") or {}).items()) or "none"
    seconds = data.get("seconds") or {}
    stubs = data.get("stubs") or {}
    return lines + [
        f"- kernels compiled ahead: {data.get('kernels')} for {data.get('target')} (Triton {data.get('triton')}), "
        f"from {data.get('calls')} calls of {', '.join(data.get('models') or [])} at tp {data.get('tp')}",
        f"- cache: {(data.get('bytes') or 0) / 2**20:.1f} MiB; code objects by arch (read from their bytes): {by_arch}",
        f"- launcher stubs: {stubs.get('launchers') or stubs.get('error') or stubs.get('not_made') or 'none'}",
        "- warm step: " + (f"{seconds.get('total')} s on {data.get('jobs')} processes" + _reused(data) if seconds else
                           "reused (compiled by an earlier build of the same key)"),
        *[f"- not planned: {n}" for n in data.get("not_planned") or []],
        f"- compiles at first use: {said}"]


def _reused(data: dict[str, Any]) -> str:
    """How many kernels the warm step compiled, the others coming from the build machine's Triton cache."""
    compiled, kernels = data.get("compiled_here"), data.get("kernels")
    if compiled is None or not kernels:
        return ""
    if compiled >= kernels:
        return ", every kernel compiled"
    return f", {compiled} of {kernels} kernels compiled, the rest copied from the build machine's Triton cache"

