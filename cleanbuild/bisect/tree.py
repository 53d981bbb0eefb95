"""One commit's package folder (aiter/ or atom/) written out of the repository, with `git archive`: no worktree,
no checkout, nothing written into the repository (a cache's promisor fetches the blobs it lacks)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from cleanbuild.core.refs import git_ref
from cleanbuild.core.run import run
from cleanbuild.upstream.gitrepo import GitError


def export(git_dir: Path, sha: str, package: str, dest: Path) -> Path:
    """Write `package/` at sha under dest; returns dest. GitError when git cannot read it.

    Folders, regular files (their executable bit) and links that stay inside dest, written by hand rather than by
    TarFile.extractall(filter="data"), which Python 3.11 has only from 3.11.4 (Debian 12's python3 is 3.11.2). What
    the data filter would refuse (an absolute or escaping name or link, a device) is refused here too."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with tarfile.open(fileobj=io.BytesIO(_archive(git_dir, sha, package))) as archive:
        for member in archive:
            target = _inside(root, root / member.name, member.name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isreg():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
                target.chmod(0o755 if member.mode & 0o111 else 0o644)
            elif member.issym():
                _inside(root, target.parent / member.linkname, member.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(member.linkname)
            elif member.name != "pax_global_header":
                raise GitError(f"git archive of {package}/ at {sha[:12]} holds {member.name!r}, which is neither a "
                               "folder, a file nor a link. To fix, check the repository (git fsck).")
    return dest


def _inside(root: Path, path: Path, name: str) -> Path:
    """path, when it stays under root (links resolved as far as they exist); else a GitError naming the member."""
    if os.path.isabs(name) or not path.resolve().is_relative_to(root):
        raise GitError(f"git archive holds {name!r}, which points outside the folder it is written to. To fix, "
                       "check the repository (git fsck).")
    return path


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
