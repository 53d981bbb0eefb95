"""cleanbuild.upstream.gitrepo.Repo.python_files: every *.py file of a commit in one `git archive`, byte for byte what
`git show REF:PATH` gives for each (the pins' import check reads both trees through it)."""

from __future__ import annotations

import os

import pytest

from cleanbuild.upstream.gitrepo import GitError, Repo
from tests.support.gitrepos import commit_all, git


def test_every_python_file_reads_as_git_show_gives_it(tmp_path):
    repo = tmp_path / "repo"
    files = {"top.py": b"import os\n", "pkg/__init__.py": b"", "pkg/deep/mod.py": "x = '\u00e9'\n".encode(),
             "pkg/with space.py": b"y = 1\n", "pkg/data.txt": b"not python\n", "pkg/mod.pyc": b"\x00"}
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    os.symlink("deep/mod.py", repo / "pkg" / "alias.py")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    sha = commit_all(repo, "one commit")
    read = Repo(str(repo)).python_files(sha)
    paths = [p for p in git(repo, "ls-tree", "-r", "--name-only", "-z", sha).split("\0") if p.endswith(".py")]
    assert sorted(read) == sorted(paths) == ["pkg/__init__.py", "pkg/alias.py", "pkg/deep/mod.py", "pkg/with space.py",
                                             "top.py"]
    assert read == {p: Repo(str(repo)).show(sha, p) for p in paths}  # the link reads as its target's path, as show
    assert read["pkg/alias.py"] == b"deep/mod.py"


def test_a_commit_without_python_files_reads_as_none(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("no code\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    assert Repo(str(repo)).python_files(commit_all(repo, "docs only")) == {}


def test_a_commit_the_repository_lacks_is_a_git_error(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit_all(repo, "one")
    with pytest.raises(GitError) as info:
        Repo(str(repo)).python_files("0" * 40)
    assert str(info.value).startswith(f"git archive in {repo} failed because ")


def test_the_pins_import_check_reads_a_tree_through_it(tmp_path):
    from cleanbuild.upstream import pins

    repo = tmp_path / "repo"
    (repo / "aiter").mkdir(parents=True)
    (repo / "aiter" / "__init__.py").write_text("def f(): ...\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    tree = pins._tree(Repo(str(repo)), commit_all(repo, "aiter"))
    assert (tree.files, tree.module_path("aiter"), tree.read("aiter/__init__.py")) == (
        {"aiter/__init__.py"}, "aiter/__init__.py", b"def f(): ...\n")
