"""Fixtures for tests/patches: the real aiter wheel, fetched once and cached."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from patch_helpers import AITER_PIN, PYPI_CACHE, WHEEL_MEMBERS, WHEEL_NAME

from tests.support.wheels import pip_download


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
    proc = pip_download(AITER_PIN, PYPI_CACHE)
    if proc.returncode != 0:
        message = f"could not download {AITER_PIN}: {proc.stderr.strip().splitlines()[-1:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
