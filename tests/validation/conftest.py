"""CPU by default: our Triton kernels run through the interpreter, so set it before any kernel module loads."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from validation.arch import get_arch  # noqa: E402 - after TRITON_INTERPRET on purpose
from validation.checks.context import Context  # noqa: E402
from validation.device import detect  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
AITER_WHEEL = "amd-aiter==0.1.7.post2.dev18"
WHEEL_CACHE = REPO / ".cache" / "pypi"


@pytest.fixture
def cpu_ctx():
    """A Context for the CPU; keyword overrides per test."""

    def make(arch: str = "gfx942", **kw) -> Context:
        return Context(arch=get_arch(arch), info=detect("cpu"), **kw)

    return make


@pytest.fixture
def run_cli():
    """Runs `python -m validation ARGS` in a subprocess on the CPU; returns the CompletedProcess."""

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if k not in ("GPU_ARCHS", "AITER_CONFIG_GEMM_BF16")}
        full_env["TRITON_INTERPRET"] = "1"
        full_env.update(env or {})
        return subprocess.run([sys.executable, "-m", "validation", *args], cwd=REPO, env=full_env,  # noqa: S603
                              capture_output=True, text=True, timeout=300, check=False)

    return run


@pytest.fixture(scope="session")
def aiter_wheel_root(tmp_path_factory) -> Path:
    """The real pure-Python aiter wheel from PyPI (cached under .cache/pypi), unpacked; returns aiter/."""
    wheels = sorted(WHEEL_CACHE.glob("amd_aiter-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", AITER_WHEEL,  # noqa: S603
                        "-d", str(WHEEL_CACHE)], check=True, capture_output=True, timeout=600)
        wheels = sorted(WHEEL_CACHE.glob("amd_aiter-*.whl"))
    dest = tmp_path_factory.mktemp("aiter-wheel")
    with zipfile.ZipFile(wheels[-1]) as z:
        z.extractall(dest)
    return dest / "aiter"
