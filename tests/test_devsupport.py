"""The tools stand beside the test suite, not on it: no file under benchmarks/ imports tests (what both need lives
in devsupport/), and devsupport imports neither tests nor benchmarks. Read from the source (ast), imports inside
functions included. Plus devsupport's one failure, a missing mirror, and how the tests see it (a skip).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from devsupport import upstream
from tests.support import upstream as support_upstream

ROOT = Path(__file__).resolve().parents[1]


def imported(source: str) -> set[str]:
    """The top-level names of every absolute import in source: "tests" for `from tests.support.builds import x`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def offenders(folder: str, banned: set[str]) -> list[str]:
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}/"
    return [f"{path.relative_to(ROOT)} imports {', '.join(sorted(imported(path.read_text()) & banned))}"
            for path in files if imported(path.read_text()) & banned]


@pytest.mark.parametrize(("source", "names"), [
    ("import tests.support.builds", {"tests"}),
    ("from tests.support.builds import forget", {"tests"}),
    ("from tests import support", {"tests"}),
    ("def f():\n    from tests.support.upstream import AITER_PIN\n", {"tests"}),
    ("import testsuite, os.path", {"testsuite", "os"}),
    ("from .tests import x", set()),
])
def test_imported_names_the_top_level_package_of_each_absolute_import(source, names):
    assert imported(source) == names


def test_no_benchmark_imports_the_test_suite():
    assert offenders("benchmarks", {"tests"}) == []


def test_devsupport_imports_neither_the_tests_nor_the_benchmarks():
    assert offenders("devsupport", {"tests", "benchmarks"}) == []



def test_upstream_dir_is_the_folder_holding_both_repositories(tmp_path, monkeypatch):
    (tmp_path / "aiter.git").mkdir()
    (tmp_path / "atom.git").mkdir()
    monkeypatch.setenv(upstream.ENV, str(tmp_path))
    assert upstream.upstream_dir() == tmp_path.resolve()


def test_a_missing_mirror_is_one_line_naming_the_folder_and_the_variable(tmp_path, monkeypatch):
    (tmp_path / "aiter.git").mkdir()
    monkeypatch.setenv(upstream.ENV, str(tmp_path))
    with pytest.raises(upstream.MirrorMissing) as info:
        upstream.upstream_dir()
    assert str(info.value) == f"no aiter.git and atom.git under {tmp_path} (set {upstream.ENV} to the folder holding them)"


@pytest.mark.parametrize("hook", [support_upstream.pytest_runtest_setup, support_upstream.pytest_runtest_call])
def test_the_tests_skip_where_the_mirror_is_missing(hook, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    wrapper = hook(None)
    next(wrapper)
    with pytest.raises(pytest.skip.Exception, match="^no aiter.git here$"):
        wrapper.throw(upstream.MirrorMissing("no aiter.git here"))


def test_the_tests_fail_where_the_mirror_is_missing_and_ci_is_true(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="^CI=true and no aiter.git here$"), support_upstream.mirror_or_skip():
        raise upstream.MirrorMissing("no aiter.git here")


def test_the_skip_hooks_are_registered(request):
    assert request.config.pluginmanager.is_registered(support_upstream)
