"""The real ROCm/aiter and ROCm/ATOM repositories ($ATOM_BUILD_MIRROR, else ../shared/upstream) that the tests and
the benchmarks read as a mirror, and the commits they name.

The commits are the ones the upstream README lists: the pins of the default profile, the 2026-08-22 heads of main,
the pull-request head the old aiter pin named and the mori commit the old ATOM pin named. A missing folder raises
MirrorMissing, which the tests make a skip (a failure when CI=true: tests/support/upstream.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.upstream import mirror, wheelindex
from cleanbuild.upstream.profiles import Profile

ENV = mirror.ENV
DEFAULT = REPO_ROOT.parent / "shared" / "upstream"

AITER_PIN = "79366eb81451e20bc206f63ab56cae8c63c927ed"  # 2026-08-03, squash-merge of PR 4465 (default profile)
AITER_HEAD = "e4048607a535ace3a2b51ded31b1c8c2d45c0879"  # main on 2026-08-22
AITER_PR_HEAD = "024344700df39b0d78a57f0b626b00fe2661b861"  # only on refs/pull/4465/head (the old pin)
ATOM_PIN = "181b0f46dfd783bfc083f42d88b3de59f02171bf"  # 2026-07-31 (default profile)
ATOM_HEAD = "ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21"  # main on 2026-08-22
MORI_COMMIT = "f9b010e4f4f09558f9e74319e77bdc1c70049893"  # the old ATOM "pin": a ROCm/mori commit


class MirrorMissing(Exception):
    """No aiter.git and atom.git in the mirror folder; the message says where it looked and how to point elsewhere."""


def upstream_dir() -> Path:
    """The folder holding aiter.git and atom.git (MirrorMissing when either is missing)."""
    path = Path(os.environ.get(ENV) or DEFAULT)
    if (path / "aiter.git").exists() and (path / "atom.git").exists():
        return path.resolve()
    raise MirrorMissing(f"no aiter.git and atom.git under {path} (set {ENV} to the folder holding them)")


def mirrored(profile: Profile) -> Profile:
    """The profile with its aiter and ATOM read from upstream_dir(), as ATOM_BUILD_MIRROR makes a task read them, and
    its CPU torch wheel from ATOM_BUILD_TORCH_INDEX when that is set (CI's machine keeps it in a folder)."""
    return wheelindex.attach(mirror.attach(profile, upstream_dir()),
                             wheelindex.location(os.environ.get(wheelindex.ENV)))


def writable_copy(name: str, dest: Path) -> Path:
    """A writable copy of upstream_dir()/name (a bare repository), every ref and object of it. These copies are
    shallow, so `git clone` ignores --local and --shared and repacks every object (about a second of CPU); copying
    the folder gives the same repository in a few milliseconds."""
    shutil.copytree(upstream_dir() / name, dest)
    for path in (dest, *dest.rglob("*")):  # the shared copies are read-only; this one gets new objects and refs
        path.chmod(path.stat().st_mode | 0o200)
    return dest
