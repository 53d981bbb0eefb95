"""Shared helpers for tests/patches (a unique module name: other test folders have a conftest too)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(REPO) not in sys.path:  # `pytest` without `python -m` does not add the cwd
    sys.path.insert(0, str(REPO))

AITER_PIN = "amd-aiter==0.1.7.post2.dev18"
WHEEL_NAME = "amd_aiter-0.1.7.post2.dev18-py3-none-any.whl"
PYPI_CACHE = REPO / ".cache" / "pypi"
# What the tests read from the wheel; unpacking all 9000 files would only cost time.
WHEEL_MEMBERS = ("aiter/__init__.py", "aiter/tuned_gemm.py", "aiter/jit/core.py")

LINEAR = "atom/model_ops/linear.py"
ENVS = "atom/utils/envs.py"
MOE = "atom/model_ops/moe.py"
LAYERNORM = "atom/model_ops/layernorm.py"
ACTIVATION = "atom/model_ops/activation.py"
TOPK = "atom/model_ops/topK.py"
TUNED_GEMM = "aiter/tuned_gemm.py"
JIT_CORE = "aiter/jit/core.py"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.py.txt").read_bytes()


def make_root(base: Path, files: dict[str, str | bytes]) -> Path:
    """A root holding target -> fixture name (or raw bytes)."""
    root = base / "root"
    for target, source in files.items():
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source if isinstance(source, bytes) else fixture_bytes(source))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
