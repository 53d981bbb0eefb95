"""Fixtures for the audit tests: the real upstream aiter and ATOM packages, exported once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from audit_helpers import apply_patches, export, install_tree, site_copy

from tests.support.upstream import AITER_PIN, ATOM_PIN


@pytest.fixture(scope="session")
def upstream_packages(tmp_path_factory) -> Path:
    """aiter/ and atom/ at the profiles' pins, as plain folders (copy them before changing anything)."""
    out = tmp_path_factory.mktemp("upstream")
    export("aiter", AITER_PIN, "aiter", out)
    export("atom", ATOM_PIN, "atom", out)
    return out


@pytest.fixture(scope="session")
def pristine_site(upstream_packages, tmp_path_factory) -> Path:
    """A site-packages folder holding the real aiter and ATOM, installed as distributions (never changed)."""
    site = tmp_path_factory.mktemp("pristine") / "site-packages"
    install_tree(site, "amd-aiter", "0.1.20.dev0+g79366eb8", upstream_packages / "aiter", "aiter")
    install_tree(site, "atom", "0.1.1.dev1+g181b0f46", upstream_packages / "atom", "atom")
    return site


@pytest.fixture
def real_site(pristine_site, tmp_path) -> Path:
    """This test's copy of the pristine site, under a fake image root (tmp_path/root/opt/venv/site-packages)."""
    return site_copy(pristine_site, tmp_path / "root")


@pytest.fixture(scope="session")
def patched_pristine(pristine_site, tmp_path_factory) -> Path:
    """The pristine site after `python -m patches apply`, once per session (never changed after)."""
    site = site_copy(pristine_site, tmp_path_factory.mktemp("patched") / "root")
    apply_patches(site)
    return site


@pytest.fixture
def patched_site(patched_pristine, tmp_path) -> Path:
    """This test's copy of the patched site, laid out as real_site: what real_site is after apply_patches."""
    return site_copy(patched_pristine, tmp_path / "root")


@pytest.fixture
def fake_root(tmp_path) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return root
