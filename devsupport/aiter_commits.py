"""A mirror folder for `bisect aiter --image` (its test and benchmark): a copy of shared/upstream's aiter.git with
commits made on the profiles' pin, one of which points aiter's "hipblaslt" entry of solMap (aiter/tuned_gemm.py)
at torch_gemm; every other commit touches an unrelated file. atom.git is shared/upstream's, linked."""

from __future__ import annotations

from pathlib import Path

from devsupport.gitrepos import commit_all, git
from devsupport.upstream import AITER_PIN, upstream_dir, writable_copy

HIPBLASLT_ENTRY = '    "hipblaslt": hipb_gemm,\n'
REROUTED = '    "hipblaslt": torch_gemm,\n'


def mirror_with_commits(folder: Path, commits: int, break_at: int) -> list[str]:
    """folder/aiter.git (a writable copy) gets `commits` commits on the pin; commit `break_at` (0-based) reroutes
    hipBLASLt to torch. Returns their SHAs, oldest first."""
    writable_copy("aiter.git", folder / "aiter.git")
    (folder / "atom.git").symlink_to(upstream_dir() / "atom.git")
    work = folder / "work"
    git(folder / "aiter.git", "worktree", "add", "-q", "-b", "bisect-test", str(work), AITER_PIN)
    tuned = work / "aiter" / "tuned_gemm.py"
    if HIPBLASLT_ENTRY not in tuned.read_text():
        raise AssertionError("the pin's solMap has no hipblaslt entry to reroute")
    shas = []
    for index in range(commits):
        if index == break_at:
            tuned.write_text(tuned.read_text().replace(HIPBLASLT_ENTRY, REROUTED))
        (work / "aiter" / "configs" / "BISECT_TEST").write_text(f"commit {index}\n")
        rerouted = " reroutes hipblaslt to torch (#9001)" if index == break_at else ""
        shas.append(commit_all(work, f"test commit {index}{rerouted}"))
    git(folder / "aiter.git", "worktree", "remove", "--force", str(work))
    return shas
