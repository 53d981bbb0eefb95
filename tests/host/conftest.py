"""Fixtures of the host unit tier: the real upstream repositories and a throw-away copy of the profiles folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cleanbuild.upstream.profiles import PROFILE_DIR
from tests.support.upstream import upstream_dir

PROFILE_FILES = ("default.toml", "offline.toml", "default.lock", "default.build.lock", "offline.lock",
                 "offline.build.lock")


@pytest.fixture(scope="session")
def upstream() -> Path:
    """The folder holding the real aiter.git and atom.git (skip without it, fail when CI=true)."""
    return upstream_dir()


@pytest.fixture(scope="session")
def upstream_sets(upstream) -> dict[str, str]:
    """Profile overrides pointing aiter and ATOM at the upstream copies (same commits as GitHub's)."""
    return {"components.aiter.repo": str(upstream / "aiter.git"), "components.atom.repo": str(upstream / "atom.git")}


@pytest.fixture
def profile_dir(tmp_path) -> Path:
    """A copy of cleanbuild/profiles (both profiles and their four lock files) that a test may change."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    for name in PROFILE_FILES:
        shutil.copyfile(PROFILE_DIR / name, folder / name)
    return folder
