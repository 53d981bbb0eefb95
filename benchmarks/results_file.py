"""benchmarks/results.json (schema 2): one entry per benchmark, {date, command, engine, result[, note]}, the entry
a new run replaces kept under "superseded". The bench scripts write it; benchmarks/render.py makes the page from it."""

from __future__ import annotations

import json
from pathlib import Path

MACHINE = "2 cores, 24 GiB (this repo's CI kind)"


def record(path: Path, name: str, entry: dict) -> None:
    """Write one benchmark's entry into results.json (schema 2, rendered by benchmarks/render.py); the entry it
    replaces moves to "superseded". Written after every row, so a row survives a later failure."""
    results = json.loads(path.read_text()) if path.is_file() else {"schema": 2, "benchmarks": {}, "superseded": []}
    results["machine"] = MACHINE
    if name in results["benchmarks"]:
        results["superseded"].insert(0, {"name": name, **results["benchmarks"][name]})
    results["benchmarks"][name] = entry
    path.write_text(json.dumps(results, indent=2) + "\n")


def current(path: Path, name: str) -> dict | None:
    """The result of a benchmark as results.json holds it now (a later row may build on it)."""
    entry = json.loads(path.read_text())["benchmarks"].get(name) if path.is_file() else None
    return entry and entry["result"]
