"""Optional aiter: find it without importing it, and import its pieces without letting them crash us."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import traceback
from pathlib import Path


def aiter_version() -> str | None:
    for dist in ("amd-aiter", "aiter"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def aiter_root(override: str | None) -> Path | None:
    """The aiter package folder (the one holding configs/ and ops/), from --aiter-root or the install."""
    if override:
        p = Path(override)
        return p / "aiter" if (p / "aiter" / "configs").is_dir() else p
    try:
        spec = importlib.util.find_spec("aiter")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed() -> bool:
    return aiter_root(None) is not None


def try_import(module: str):
    """(module, None) or (None, one-line error). aiter can raise SystemExit when a JIT build fails."""
    try:
        return importlib.import_module(module), None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure is a finding to report
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return None, f"import {module} failed: {last}"
