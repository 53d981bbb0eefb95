"""Scripts imported by path, never on sys.path: docker/scripts/*.py (image-side scripts whose functions the host tests
call directly) and benchmarks/*.py (the bench scripts' parsers and the page's renderer)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "docker" / "scripts"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """docker/scripts/<name>.py as a module named <name>_under_test (never on sys.path)."""
    return _load(SCRIPTS / f"{name}.py", f"{name}_under_test", register=False)


def load_bench(name: str) -> ModuleType:
    """benchmarks/<name>.py as a module named bench_<name>, registered in sys.modules (a dataclass resolves its
    annotations there)."""
    return _load(BENCH / f"{name}.py", f"bench_{name}", register=True)


def _load(path: Path, name: str, *, register: bool) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
