"""The real ROCm/aiter and ROCm/ATOM repositories ($ATOM_BUILD_MIRROR, else ../shared/upstream) for host tests.

The commits the tests name are the ones the upstream README lists: the pins of the default profile, the
2026-08-22 heads of main, the pull-request head the old aiter pin named and the mori commit the old ATOM pin named.
`tree_at` reads every .py file of a commit with ONE `git cat-file --batch` (a `git show` per file, as
cleanbuild.upstream.pins does, takes seconds per tree): the import checker itself does not care how files are read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.upstream import mirror, wheelindex
from cleanbuild.upstream.imports import Tree
from cleanbuild.upstream.profiles import Profile

ENV = mirror.ENV
DEFAULT = REPO_ROOT.parent / "shared" / "upstream"

AITER_PIN = "79366eb81451e20bc206f63ab56cae8c63c927ed"  # 2026-08-03, squash-merge of PR 4465 (default profile)
AITER_HEAD = "e4048607a535ace3a2b51ded31b1c8c2d45c0879"  # main on 2026-08-22
AITER_PR_HEAD = "024344700df39b0d78a57f0b626b00fe2661b861"  # only on refs/pull/4465/head (the old pin)
ATOM_PIN = "181b0f46dfd783bfc083f42d88b3de59f02171bf"  # 2026-07-31 (default profile)
ATOM_HEAD = "ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21"  # main on 2026-08-22
MORI_COMMIT = "f9b010e4f4f09558f9e74319e77bdc1c70049893"  # the old ATOM "pin": a ROCm/mori commit


def upstream_dir() -> Path:
    """The folder holding aiter.git and atom.git: a failure when CI=true and it is missing, a skip elsewhere."""
    path = Path(os.environ.get(ENV) or DEFAULT)
    if (path / "aiter.git").exists() and (path / "atom.git").exists():
        return path.resolve()
    why = f"no aiter.git and atom.git under {path} (set {ENV} to the folder holding them)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {why}", pytrace=False)
    pytest.skip(why)


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


def git(repo: Path, *args: str, input_: bytes | None = None, env: dict | None = None) -> bytes:
    argv = ["git", "-c", "safe.directory=*", "--git-dir", str(repo), *args]
    return subprocess.run(argv, input=input_, capture_output=True, check=True,  # noqa: S603
                          env={**os.environ, **(env or {})}).stdout


def tree_at(repo: Path, ref: str) -> Tree:
    """imports.Tree of one commit, every .py file read in one batch."""
    paths = git(repo, "ls-tree", "-r", "--name-only", ref).decode().split()
    wanted = [p for p in paths if p.endswith(".py")]
    out = git(repo, "cat-file", "--batch", input_="".join(f"{ref}:{p}\n" for p in wanted).encode())
    files: dict[str, bytes] = {}
    at = 0
    for path in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        size = int(header[2])
        files[path] = out[end + 1:end + 1 + size]
        at = end + 1 + size + 1
    return Tree(paths, files.get)


def commit_file(bare: Path, parent: str, path: str, data: bytes, message: str) -> str:
    """A new commit on refs/heads/main of a bare repository: parent's tree with one file replaced (no checkout)."""
    index = bare / "atom-build-test.index"
    env = {"GIT_INDEX_FILE": str(index), "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}
    blob = git(bare, "hash-object", "-w", "--stdin", input_=data).decode().strip()
    git(bare, "read-tree", parent, env=env)
    git(bare, "update-index", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = git(bare, "write-tree", env=env).decode().strip()
    sha = git(bare, "commit-tree", tree, "-p", parent, "-m", message, env=env).decode().strip()
    git(bare, "update-ref", "refs/heads/main", sha)
    index.unlink()
    return sha
