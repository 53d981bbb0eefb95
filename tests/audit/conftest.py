"""Fixtures for the audit tests: the real upstream aiter and ATOM packages, exported once per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from audit_helpers import AITER_REV, ATOM_REV, export, install_tree


@pytest.fixture(scope="session")
def upstream_packages(tmp_path_factory) -> Path:
    """aiter/ at 79366eb8 and atom/ at 181b0f46, as plain folders (copy them before changing anything)."""
    out = tmp_path_factory.mktemp("upstream")
    export("aiter", AITER_REV, "aiter", out)
    export("atom", ATOM_REV, "atom", out)
    return out


@pytest.fixture(scope="session")
def pristine_site(upstream_packages, tmp_path_factory) -> Path:
    """A site-packages folder holding the real aiter and ATOM, installed as distributions (never changed)."""
    site = tmp_path_factory.mktemp("pristine") / "site-packages"
    install_tree(site, "amd-aiter", "0.1.20.dev0+g79366eb8", upstream_packages / "aiter", "aiter")
    install_tree(site, "atom", "0.1.1.dev1+g181b0f46", upstream_packages / "atom", "atom")
    return site


# Files tests or patches rewrite get their own copy; the other ~1700 are hard links to the pristine tree.
WRITABLE = ("aiter/tuned_gemm.py", "aiter/jit/core.py", "aiter/utility/dtypes.py", "atom/model_ops/linear.py",
            "atom/utils/envs.py")


@pytest.fixture
def real_site(pristine_site, tmp_path) -> Path:
    """This test's copy of the pristine site, under a fake image root (tmp_path/root/opt/venv/site-packages)."""
    site = tmp_path / "root" / "opt" / "venv" / "site-packages"

    def copy(src: str, dst: str) -> None:
        if Path(src).relative_to(pristine_site).as_posix() in WRITABLE:
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    shutil.copytree(pristine_site, site, copy_function=copy)
    return site


@pytest.fixture
def fake_root(tmp_path) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return root
