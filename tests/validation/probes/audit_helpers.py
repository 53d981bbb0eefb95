"""Fake site-packages trees with real dist-info folders (METADATA, RECORD), and the real upstream sources.

A distribution is installed the way pip leaves it: the files, then NAME-VERSION.dist-info with METADATA,
INSTALLER and a RECORD listing every file with its sha256 and size. importlib.metadata reads them as it
reads any installed wheel.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gpucode import aiter_asm_sample
from validation.probes.image import Image

REPO = Path(__file__).resolve().parents[3]
AITER_OLD_REV = "9e7220b1ba339ea7fbfe9aa7169f75aa4ae9035e"  # 2026-01: jit/core.py still raises SystemExit


def upstream_dir() -> Path:
    """The folder holding aiter.git and atom.git: $ATOM_BUILD_MIRROR, else ../shared/upstream beside the checkout."""
    return Path(os.environ.get("ATOM_BUILD_MIRROR") or Path(__file__).resolve().parents[4] / "shared" / "upstream")


def need_upstream(repo: str) -> Path:
    """The bare repo, or a skip (a failure when CI=true)."""
    git_dir = upstream_dir() / f"{repo}.git"
    if not git_dir.is_dir():
        message = f"{git_dir} is missing (set ATOM_BUILD_MIRROR to the folder holding aiter.git and atom.git)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return git_dir


def export(repo: str, rev: str, path: str, dest: Path) -> Path:
    """`git archive REV PATH` of the real upstream repo, unpacked under dest."""
    git_dir = need_upstream(repo)
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={git_dir}", "archive", rev, path],  # noqa: S603,S607
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)  # noqa: S603,S607
    return dest / path


def show(repo: str, rev: str, path: str) -> bytes:
    git_dir = need_upstream(repo)
    return subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={git_dir}", "show", f"{rev}:{path}"],  # noqa: S603,S607
                          capture_output=True, check=True).stdout


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist_info(site: Path, name: str, version: str, files: list[str], requires: tuple[str, ...] = ()) -> Path:
    """Write NAME-VERSION.dist-info for files already under site (paths relative to site, '/'-separated)."""
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    meta = site / f"{stem}.dist-info"
    meta.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (meta / "METADATA").write_text("\n".join(lines) + "\n")
    (meta / "INSTALLER").write_text("pip\n")
    record = []
    for rel in files:
        data = (site / rel).read_bytes() if (site / rel).is_file() else b""
        record.append(f"{rel},{_hash(data)},{len(data)}")
    record += [f"{stem}.dist-info/METADATA,,", f"{stem}.dist-info/INSTALLER,,", f"{stem}.dist-info/RECORD,,"]
    (meta / "RECORD").write_text("\n".join(record) + "\n")
    return meta


def install_files(site: Path, name: str, version: str, files: dict[str, str | bytes],
                  requires: tuple[str, ...] = ()) -> Path:
    """Write the files (path -> content) under site and their dist-info."""
    for rel, content in files.items():
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    return dist_info(site, name, version, list(files), requires)


def install_tree(site: Path, name: str, version: str, source: Path, package: str) -> Path:
    """Copy a real source package (e.g. an upstream aiter/) into site and record every file it holds."""
    shutil.copytree(source, site / package, dirs_exist_ok=True)
    files = sorted(p.relative_to(site).as_posix() for p in (site / package).rglob("*") if p.is_file())
    return dist_info(site, name, version, files)


# Files tests or patches rewrite get their own copy; the other ~1700 are hard links to the pristine tree.
WRITABLE = ("aiter/tuned_gemm.py", "aiter/jit/core.py", "aiter/utility/dtypes.py", "atom/model_ops/linear.py",
            "atom/utils/envs.py")


def site_copy(site: Path, root: Path) -> Path:
    """site copied to a fake image's root/opt/venv/site-packages: hard links, and copies of the WRITABLE files."""
    dest = root / "opt" / "venv" / "site-packages"

    def copy(src: str, dst: str) -> None:
        if Path(src).relative_to(site).as_posix() in WRITABLE:
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    shutil.copytree(site, dest, copy_function=copy)
    return dest


def apply_patches(site: Path) -> subprocess.CompletedProcess:
    """`python -m patches apply --root SITE`, the real CLI, as build-clean's patch layer runs it."""
    return subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(site), "--json"],  # noqa: S603
                          cwd=REPO, capture_output=True, text=True, check=True)


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def make_context(site: Path | None, root: Path, arch: str | None = "gfx942", env: dict | None = None, **kw) -> Image:
    """A probe context over a fake image: root is its /, site its only sys.path entry. An image for an arch carries
    that arch's assembly kernels beside its aiter (one real one, tests.support.gpucode)."""
    if site is not None and arch and (site / "aiter").is_dir() and not (site / "aiter_meta").exists():
        aiter_asm_sample(site, arch)
    return Image(arch=arch, arch_source="--arch" if arch else "test: no arch", env=dict(env or {}), root=root,
                   sys_path=[str(site)] if site else [], **kw)
