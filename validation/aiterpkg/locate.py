"""Optional aiter: find it without importing it, and import its pieces without letting them crash us."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import json
import re
import traceback
from pathlib import Path

from validation.core.git_head import git_dir, head_commit

DISTRIBUTIONS = ("amd-aiter", "aiter")


def _distribution():
    for name in DISTRIBUTIONS:
        try:
            return importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def aiter_version() -> str | None:
    dist = _distribution()
    return dist.version if dist is not None else None


def aiter_root(override: str | None) -> Path | None:
    """The aiter package folder (the one holding configs/ and ops/), from --aiter-src (or its alias --aiter-root) or the install."""
    if override:
        p = Path(override).resolve()
        pkg = p / "aiter"
        return pkg if (pkg / "configs").is_dir() or (pkg / "ops").is_dir() else p
    try:
        # On sys.path only: an `aiter` already in sys.modules may be validation.aiterpkg.adapter's stand-in.
        spec = importlib.machinery.PathFinder.find_spec("aiter")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def aiter_commit(root: Path | None, from_source: bool) -> str | None:
    """The aiter commit: HEAD of the checkout holding --aiter-src, else what the installed package recorded.

    An install records it in PEP 610's direct_url.json (pip install git+...) or in its setuptools_scm version
    ("0.1.10.dev3+g79366eb81", also in aiter/_version.py of a built tree); a release version records none.
    """
    if from_source:
        dot_git = git_dir(root) if root is not None else None
        if dot_git is not None:
            return head_commit(dot_git)
        version_py = root / "_version.py" if root is not None else None
        return _scm_commit(version_py.read_text()) if version_py and version_py.is_file() else None
    dist = _distribution()
    if dist is None:
        return None
    direct = dist.read_text("direct_url.json")
    if direct:
        commit = json.loads(direct).get("vcs_info", {}).get("commit_id")
        if commit:
            return commit
    return _scm_commit(dist.version)


def _scm_commit(version: str) -> str | None:
    m = re.search(r"\+g([0-9a-f]{7,40})", version)
    return m.group(1) if m else None


def installed() -> bool:
    return aiter_root(None) is not None


def try_import(module: str):
    """(module, None) or (None, one-line error). aiter can raise SystemExit when a JIT build fails."""
    try:
        return importlib.import_module(module), None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure is a finding to report
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return None, f"import {module} failed: {last}"
