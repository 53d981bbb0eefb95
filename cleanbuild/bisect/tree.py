"""One commit's package folder (aiter/ or atom/) written out of the repository, with `git archive`: no worktree,
no checkout, nothing written into the repository (a cache's promisor fetches the blobs it lacks)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from cleanbuild.core.refs import git_ref
from cleanbuild.core.run import run
from cleanbuild.upstream.gitrepo import GitError


def export(git_dir: Path, sha: str, package: str, dest: Path) -> Path:
    """Write `package/` at sha under dest; returns dest. GitError when git cannot read it."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(_archive(git_dir, sha, package))) as archive:
        archive.extractall(dest, filter="data")
    return dest


def contents(git_dir: Path, sha: str, package: str) -> dict[str, bytes]:
    """`package/` at sha as {path: bytes} (regular files), read without writing a file. GitError as export."""
    with tarfile.open(fileobj=io.BytesIO(_archive(git_dir, sha, package))) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()  # type: ignore[union-attr]
                if m.isreg()}


def _archive(git_dir: Path, sha: str, package: str) -> bytes:
    argv = ["git", "-c", "safe.directory=*", "--git-dir", str(git_dir), "archive", "--format=tar",
            "--end-of-options", git_ref(sha, "commit"), package]
    result = run(argv, check=False, echo=False, binary=True, timeout=600)
    if result.returncode != 0 or result.timed_out:
        why = (result.stderr.strip().splitlines() or ["timed out" if result.timed_out else "no output"])[-1]
        raise GitError(f"git archive of {package}/ at {sha[:12]} failed because {why}. To fix, check that "
                       f"{git_dir} is an intact repository (git fsck) that holds {sha[:12]}.")
    return result.stdout_bytes


def files(root: Path) -> list[str]:
    """Every file under root, as a path relative to it with '/' (the form cleanbuild.upstream.imports reads)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
