"""The real ROCm/aiter and ROCm/ATOM repositories for host tests: devsupport.upstream's folder, pins and copies, a
missing folder made a skip (a failure when CI=true), and readers of their commits.

`tree_at` reads every .py file of a commit with ONE `git cat-file --batch` (a `git show` per file, as
cleanbuild.upstream.pins does, takes seconds per tree): the import checker itself does not care how files are read.
A pytest plugin (tests/conftest.py's pytest_plugins): devsupport raises MirrorMissing wherever a test or a fixture
reaches for the folder, and the hooks here turn it into the test's skip.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.upstream.imports import Tree
from devsupport.upstream import (
    AITER_HEAD,
    AITER_PIN,
    AITER_PR_HEAD,
    ATOM_HEAD,
    ATOM_PIN,
    DEFAULT,
    ENV,
    MORI_COMMIT,
    MirrorMissing,
    mirrored,
    upstream_dir,
    writable_copy,
)

__all__ = ["AITER_HEAD", "AITER_PIN", "AITER_PR_HEAD", "ATOM_HEAD", "ATOM_PIN", "DEFAULT", "ENV", "MORI_COMMIT",
           "REPO_ROOT", "commit_file", "git", "mirrored", "tree_at", "upstream_dir", "writable_copy"]


@contextlib.contextmanager
def mirror_or_skip() -> Iterator[None]:
    """MirrorMissing made the test's skip, or its failure when CI=true (CI always has the mirror)."""
    try:
        yield
    except MirrorMissing as missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {missing}", pytrace=False)
        pytest.skip(str(missing))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):  # the fixtures (the session's `upstream`)
    with mirror_or_skip():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):  # the test itself (offline_plan, writable_copy)
    with mirror_or_skip():
        return (yield)


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
