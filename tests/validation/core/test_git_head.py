"""Reading a checkout's HEAD from its files, against real git repositories."""

import subprocess

import pytest

from validation.aiterpkg.locate import aiter_commit
from validation.core.git_head import git_dir, head_commit

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def _git(cwd, *args) -> str:
    return subprocess.run([*GIT, "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository on branch main with one commit: HEAD is a symbolic ref to a loose ref."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("x")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_detached_checkout_of_the_pin(aiter_checkout, aiter_pin):
    assert head_commit(git_dir(aiter_checkout)) == aiter_pin


def test_the_report_reads_it_from_the_package_folder(aiter_pkg, aiter_pin):
    assert aiter_commit(aiter_pkg, from_source=True) == aiter_pin


def test_branch_with_a_loose_ref(repo):
    assert head_commit(git_dir(repo)) == _git(repo, "rev-parse", "HEAD")


def test_branch_with_a_packed_ref(repo):
    _git(repo, "pack-refs", "--all")
    assert head_commit(git_dir(repo)) == _git(repo, "rev-parse", "HEAD")


def test_linked_worktree(repo, tmp_path_factory):
    other = tmp_path_factory.mktemp("wt") / "wt"
    _git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    assert head_commit(git_dir(other)) == _git(repo, "rev-parse", "HEAD")


def test_a_copy_inside_another_repository_reports_no_commit(repo):
    (repo / "copy" / "aiter").mkdir(parents=True)
    assert aiter_commit(repo / "copy" / "aiter", from_source=True) is None
