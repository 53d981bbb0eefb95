"""`python -m patches upstream`: fetch upstream's target files and check every patch.

The real run points at the shared/upstream repositories (they serve any commit,
like GitHub does); drift, a vanished target and unreachable repositories use
small git repositories made here from the fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
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
    fixture_bytes,
)
from patch_upstream_repos import NAMED, missing_reason, upstream_dir

from patches import cli
from patches import upstream as upstream_mod

NAMES = [
    "tuned-gemm-hipblaslt",
    "no-asm-gemm-gfx950",
    "jit-core-runtime-error",
    "atom-ck-free-triton-gemm",
    "atom-ck-free-triton-moe",
    "atom-ck-free-triton-norm",
    "atom-ck-free-native-act",
    "atom-ck-free-native-topk",
]


def upstream(*args):
    cmd = [sys.executable, "-m", "patches", "upstream", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)  # noqa: S603


def git_repo(path, files: dict[str, str]):
    """A one-commit repository holding target -> fixture name."""
    path.mkdir()
    for target, fixture in files.items():
        (path / target).parent.mkdir(parents=True, exist_ok=True)
        (path / target).write_bytes(fixture_bytes(fixture))
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-08-22T12:00:00+00:00",
        "GIT_COMMITTER_DATE": "2026-08-22T12:00:00+00:00",
    }
    steps = (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-q", "-m", "fixture"],
    )
    for args in steps:
        cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
        subprocess.run(cmd, cwd=path, env=env, check=True, capture_output=True)  # noqa: S603
    return path


@pytest.fixture
def atom_repo(tmp_path):
    return git_repo(tmp_path / "atom", {LINEAR: "atom/linear_plain.before", ENVS: "atom/envs_without.before",
                                           MOE: "atom/moe_plain.before", LAYERNORM: "atom/layernorm_plain.before",
                                           ACTIVATION: "atom/activation_plain.before", TOPK: "atom/topk_plain.before"})


def test_real_upstream_heads(tmp_path):
    reason = missing_reason()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"the real upstream repositories are needed in CI: {reason}")
    if reason:
        pytest.skip(reason)
    proc = upstream("--aiter", upstream_dir() / "aiter.git", "--atom", upstream_dir() / "atom.git", "--json")
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["exit_code"]) == (0, 0), proc.stderr
    assert [r["commit"] for r in report["repos"]] == [
        NAMED["aiter"]["main 2026-08-22"],
        NAMED["atom"]["main 2026-08-22"],
    ]
    assert [(p["name"], p["outcome"]) for p in report["patches"]] == list(
        zip(NAMES, ["applied", "applied", "upstream-fixed", *["applied"] * 5], strict=True)
    )
    assert {p["date"][:10] for p in report["patches"]} == {"2026-08-22"}


def test_text_report_names_commit_and_date(tmp_path, atom_repo):
    aiter = git_repo(
        tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_new.before", JIT_CORE: "aiter/core_fixed"}
    )
    proc = upstream("--aiter", aiter, "--atom", atom_repo)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=aiter, capture_output=True, text=True).stdout  # noqa: S603, S607
    assert proc.returncode == 0, proc.stderr
    assert (
        f"upstream-fixed   jit-core-runtime-error     aiter@{commit[:12]} (2026-08-22)"
        in proc.stdout.splitlines()
    )


def test_only_the_target_files_are_fetched(tmp_path):
    repo = git_repo(
        tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_new.before", "aiter/other.py": "aiter/core_fixed"}
    )
    gitdir = tmp_path / "fetched.git"
    upstream_mod.fetch("aiter", str(repo), "HEAD", [TUNED_GEMM, JIT_CORE], tmp_path / "root", gitdir)
    listing = [
        "git",
        "--git-dir",
        str(gitdir),
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objecttype)",
    ]
    kinds = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()  # noqa: S603
    # tuned_gemm.py; other.py stayed on the server, core.py does not exist. The repository is a plain one (no
    # uploadpack.allowFilter of its own, as a mirror's copy): the fetch's own upload-pack honours the filter.
    assert kinds.count("blob") == 1
    assert (tmp_path / "root" / TUNED_GEMM).read_bytes() == fixture_bytes("aiter/tuned_gemm_new.before")


def test_drift_exits_1_and_names_the_patch(tmp_path, atom_repo):
    aiter = git_repo(
        tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_drift_two_defaults", JIT_CORE: "aiter/core_fixed"}
    )
    proc = upstream("--aiter", aiter, "--atom", atom_repo)
    assert proc.returncode == 1
    assert proc.stderr.startswith("patches: drift: tuned-gemm-hipblaslt: aiter/tuned_gemm.py:10: expected ")


def test_a_target_gone_upstream_is_drift(tmp_path, atom_repo):
    aiter = git_repo(tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_new.before"})
    proc = upstream("--aiter", aiter, "--atom", atom_repo, "--json")
    outcomes = {p["name"]: (p["outcome"], p["detail"]) for p in json.loads(proc.stdout)["patches"]}
    assert proc.returncode == 1
    assert outcomes["jit-core-runtime-error"][0] == "drifted"
    assert "expected this file in aiter@" in outcomes["jit-core-runtime-error"][1]


def test_ref_picks_the_commit(tmp_path, atom_repo):
    """main has the fixed jit/core.py; branch `old` the pre-fix one."""
    aiter = git_repo(
        tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_new.before", JIT_CORE: "aiter/core_fixed"}
    )
    (aiter / JIT_CORE).write_bytes(fixture_bytes("aiter/core_old.before"))
    for args in (["checkout", "-q", "-b", "old"], ["commit", "-q", "-am", "pre-fix"]):
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
        subprocess.run(git, cwd=aiter, check=True, capture_output=True)  # noqa: S603
    report = json.loads(
        upstream("--aiter", aiter, "--atom", atom_repo, "--aiter-ref", "old", "--json").stdout
    )
    jit = next(p for p in report["patches"] if p["name"] == "jit-core-runtime-error")
    assert jit["outcome"] == "applied"


def test_unreachable_repository_exits_3_in_one_line(tmp_path, atom_repo):
    proc = upstream("--aiter", tmp_path / "no-such-repo.git", "--atom", atom_repo)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"patches: error: {tmp_path / 'no-such-repo.git'}: git fetch failed: ")


def test_unknown_ref_in_a_reachable_repository_is_not_found_exit_2(tmp_path, atom_repo, capsys):
    """The repository answers; it has no such ref: bad input (2), not an unreachable repository (3)."""
    code = cli.main(
        ["upstream", "--aiter", str(atom_repo), "--atom", str(atom_repo), "--ref", "no-such-branch"]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"patches: error: {atom_repo}: no ref 'no-such-branch' there (to fix, pass a branch, tag or commit of "
        "that repository)\n"
    )


@pytest.mark.parametrize("flag", ["--aiter-ref", "--atom-ref", "--ref"])
def test_a_ref_that_is_an_option_never_reaches_git(tmp_path, atom_repo, capsys, flag):
    """`--aiter-ref '--upload-pack=touch FILE'` once ran the command: now it is refused before git runs."""
    witness = tmp_path / "pwned"
    code = cli.main(["upstream", "--aiter", str(atom_repo), "--atom", str(atom_repo),
                     f"{flag}=--upload-pack=touch {witness}"])
    assert code == 2
    assert "is not a commit SHA or a git ref name" in capsys.readouterr().err
    assert not witness.exists()


@pytest.mark.parametrize("source", ["--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/x", "fd::17"])
def test_a_source_that_is_an_option_or_a_command_transport_is_refused(atom_repo, capsys, source):
    code = cli.main(["upstream", f"--aiter={source}", "--atom", str(atom_repo)])
    assert code == 2
    assert "is not a repository URL or path" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path, atom_repo):
    with pytest.raises(Exception, match="git fetch failed"):
        cli.main(["upstream", "--aiter", str(tmp_path / "none.git"), "--atom", str(atom_repo), "--debug"])


# ---- ATOM_BUILD_MIRROR: the default sources are its copies (aiter.git, atom.git) -----------------------------------

def test_the_mirror_gives_the_default_sources(monkeypatch, capsys):
    reason = missing_reason()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"the real upstream repositories are needed in CI: {reason}")
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv(upstream_mod.MIRROR_ENV, str(upstream_dir()))
    assert cli.main(["upstream", "--json"]) == 0
    repos = json.loads(capsys.readouterr().out)["repos"]
    assert [(r["source"], r["commit"]) for r in repos] == [
        (str(upstream_dir() / "aiter.git"), NAMED["aiter"]["main 2026-08-22"]),
        (str(upstream_dir() / "atom.git"), NAMED["atom"]["main 2026-08-22"]),
    ]


def test_a_mirror_without_a_copy_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(upstream_mod.MIRROR_ENV, str(tmp_path))
    assert cli.main(["upstream"]) == 2
    assert capsys.readouterr().err == (
        f"patches: error: ATOM_BUILD_MIRROR {tmp_path} has no aiter.git, the copy of "
        f"https://github.com/ROCm/aiter.git (to fix, put one there with `git clone --mirror "
        f"https://github.com/ROCm/aiter.git {tmp_path / 'aiter.git'}`, pass --aiter, or unset ATOM_BUILD_MIRROR)\n"
    )


def test_the_flags_beat_the_mirror(tmp_path, atom_repo, monkeypatch):
    monkeypatch.setenv(upstream_mod.MIRROR_ENV, str(tmp_path / "no-copies-here"))
    aiter = git_repo(tmp_path / "aiter", {TUNED_GEMM: "aiter/tuned_gemm_new.before", JIT_CORE: "aiter/core_fixed"})
    assert cli.main(["upstream", "--aiter", str(aiter), "--atom", str(atom_repo)]) == 0
