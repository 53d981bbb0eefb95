"""The real aiter and ATOM histories in shared/upstream, read once per session.

Only the patches' target files matter, and they change far less often than the
repositories do: every commit is mapped to the blob ids of its target files
(one `git cat-file --batch-check`), and each distinct blob is read once (one
`git cat-file --batch`). A few hundred commits cost well under a second.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patch_helpers import (
    ACTIVATION,
    ENVS,
    JIT_CORE,
    LAYERNORM,
    LINEAR,
    MOE,
    REPO,
    TOPK,
    TUNED_GEMM,
)

# The snapshots and heads shared/upstream/README.md names; the sweep must cover each one.
NAMED = {
    "aiter": {
        "2026-01-20": "9e7220b1ba339ea7fbfe9aa7169f75aa4ae9035e",
        "2026-08-03": "79366eb81451e20bc206f63ab56cae8c63c927ed",
        "main 2026-08-22": "e4048607a535ace3a2b51ded31b1c8c2d45c0879",
        "pull/4465/head": "024344700df39b0d78a57f0b626b00fe2661b861",
    },
    "atom": {
        "2026-07-31": "181b0f46dfd783bfc083f42d88b3de59f02171bf",
        "main 2026-08-22": "ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21",
    },
}
# The files each patch group reads together: the two tuned_gemm patches share a
# file, the ATOM GEMM patch edits two, the other ATOM patches one each.
GROUPS = {
    "tuned_gemm": ("aiter", (TUNED_GEMM,)),
    "jit_core": ("aiter", (JIT_CORE,)),
    "atom": ("atom", (LINEAR, ENVS)),
    "atom_moe": ("atom", (MOE,)),
    "atom_norm": ("atom", (LAYERNORM,)),
    "atom_act": ("atom", (ACTIVATION,)),
    "atom_topk": ("atom", (TOPK,)),
}


def upstream_dir() -> Path:
    return Path(os.environ.get("ATOM_BUILD_MIRROR") or REPO / ".." / "shared" / "upstream").resolve()


def missing_reason() -> str | None:
    """Why the real repositories cannot be read here, or None when they can."""
    if shutil.which("git") is None:
        return "git is not installed"
    for repo in ("aiter", "atom"):
        if not (upstream_dir() / f"{repo}.git").is_dir():
            return f"no {repo}.git under {upstream_dir()} (set ATOM_BUILD_MIRROR to the folder holding it)"
    return None


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str  # committer date, ISO 8601


@dataclass(frozen=True)
class Version:
    """One distinct content of a group's files, and every commit that has it."""

    group: str
    files: tuple[tuple[str, bytes], ...]  # (target, content); a target absent upstream is left out
    commits: tuple[Commit, ...]  # newest first

    @property
    def id(self) -> str:
        newest, oldest = self.commits[0], self.commits[-1]
        span = f"{newest.sha[:8]}" if newest == oldest else f"{oldest.sha[:8]}..{newest.sha[:8]}"
        return f"{self.group}@{span}({len(self.commits)})"

    def file(self, target: str) -> bytes:
        return dict(self.files)[target]

    def write(self, root: Path) -> Path:
        for target, data in self.files:
            (root / target).parent.mkdir(parents=True, exist_ok=True)
            (root / target).write_bytes(data)
        return root

    def has(self, sha: str) -> bool:
        return any(c.sha == sha for c in self.commits)


def git(repo: str, *args: str, stdin: bytes | None = None) -> bytes:
    gitdir = upstream_dir() / f"{repo}.git"
    # The shared folder may belong to another user and is read-only.
    cmd = ["git", "-c", "safe.directory=*", "--git-dir", str(gitdir), *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, check=True).stdout  # noqa: S603


@functools.cache
def commits(repo: str) -> tuple[Commit, ...]:
    """Every commit the repository holds (main since 2026-07-25, snapshots, pull heads), newest first."""
    out = git(repo, "log", "--all", "--format=%H %cI").decode()
    return tuple(Commit(*line.split()) for line in out.splitlines())


@functools.cache
def versions(group: str) -> tuple[Version, ...]:
    repo, targets = GROUPS[group]
    history = commits(repo)
    blob_ids = _blob_ids(repo, [f"{c.sha}:{t}" for c in history for t in targets])
    contents = _contents(repo, sorted({b for b in blob_ids if b is not None}))
    by_key: dict[tuple, list[Commit]] = {}
    for index, commit in enumerate(history):
        key = tuple(blob_ids[index * len(targets) : (index + 1) * len(targets)])
        by_key.setdefault(key, []).append(commit)
    return tuple(
        Version(group, tuple((t, contents[b]) for t, b in zip(targets, key, strict=True) if b), tuple(found))
        for key, found in by_key.items()
    )


def _blob_ids(repo: str, specs: list[str]) -> list[str | None]:
    """The blob id of each `commit:path` (None where the path is missing), in one process."""
    out = git(
        repo, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="\n".join(specs).encode() + b"\n"
    )
    ids = []
    for line in out.decode().splitlines():
        name, _, kind = line.partition(" ")
        ids.append(name if kind == "blob" else None)  # "<spec> missing" otherwise
    assert len(ids) == len(specs), "git cat-file answered a different number of lines"
    return ids


def _contents(repo: str, blob_ids: list[str]) -> dict[str, bytes]:
    """Every blob's bytes, read by one `git cat-file --batch`."""
    out = git(repo, "cat-file", "--batch", stdin="\n".join(blob_ids).encode() + b"\n")
    found, pos = {}, 0
    for blob in blob_ids:
        header_end = out.index(b"\n", pos)
        name, _, size = out[pos:header_end].decode().split()
        assert name == blob, f"git cat-file answered {name} for {blob}"
        start = header_end + 1
        found[blob] = out[start : start + int(size)]
        pos = start + int(size) + 1  # the content is followed by a newline
    return found
