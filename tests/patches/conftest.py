"""Fixtures for tests/patches: the real aiter wheel, fetched once and cached."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from patch_helpers import AITER_PIN, PYPI_CACHE, WHEEL_MEMBERS, WHEEL_NAME


@pytest.fixture(scope="session")
def aiter_wheel_dir(tmp_path_factory) -> Path:
    """The pinned aiter wheel's files, unpacked once per session (pristine: copy before patching)."""
    wheel = PYPI_CACHE / WHEEL_NAME
    if not wheel.exists():
        _download_wheel()
    out = tmp_path_factory.mktemp("aiter-wheel")
    with zipfile.ZipFile(wheel) as zf:
        for member in WHEEL_MEMBERS:
            zf.extract(member, out)
    return out


@pytest.fixture
def aiter_root(aiter_wheel_dir, tmp_path) -> Path:
    root = tmp_path / "site-packages"
    shutil.copytree(aiter_wheel_dir, root)
    return root


def _download_wheel() -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", AITER_PIN, "-d", str(PYPI_CACHE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603 (fixed argv)
    if proc.returncode != 0:
        message = f"could not download {AITER_PIN}: {proc.stderr.strip().splitlines()[-1:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
