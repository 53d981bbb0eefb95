"""docker/scripts/*.py imported by path: image-side scripts whose functions the host tests call directly."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "docker" / "scripts"


def load_script(name: str) -> ModuleType:
    """docker/scripts/<name>.py as a module named <name>_under_test (never on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
