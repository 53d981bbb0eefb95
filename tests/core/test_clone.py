"""The host runs from its clone (cleanbuild.core.clone): an editable install works from any folder, and a copy installed
without the clone (`pip install .`) says so in one line naming the install that works, leaving no generic top-level
package (validation, patches) in site-packages. The installs are real: a fresh venv, pip, the console script."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cleanbuild.cli import main
from cleanbuild.core import clone

ROOT = Path(__file__).resolve().parents[2]
# What `git clone` gives that an install reads: the project, the packages the host imports, the Dockerfiles.
CLONE_PARTS = ("pyproject.toml", "README.md", "cleanbuild", "validation", "patches", "docker", "tasks.py", "invoke.yaml")


def test_this_checkout_is_a_clone():
    assert clone.not_a_clone() is None


def test_a_package_without_its_clone_says_which_install_works(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(clone, "REPO_ROOT", tmp_path / "site-packages")
    with pytest.raises(SystemExit) as info:
        main.main(["atom-build", "plan", "--profile", "offline", "--arch", "gfx942"])
    lines = capsys.readouterr().err.splitlines()
    assert (info.value.code, len(lines)) == (3, 1), lines
    assert lines[0].startswith("error: atom-build failed because it runs from a clone of its repository")
    assert lines[0].endswith("To fix, install it from a clone: `git clone` the repository, then `pip install -e .` "
                             "in it (README: Install).")


# ---- real installs into a fresh venv ------------------------------------------------------------------------

@pytest.fixture
def fresh_clone(tmp_path) -> Path:
    dest = tmp_path / "atom-clean-build"
    dest.mkdir()
    for part in CLONE_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / part)
    return dest


@pytest.fixture
def venv(tmp_path) -> Path:
    """A new venv without pip of its own; this interpreter's packages (pip, setuptools, invoke, ...) reach it through
    a .pth, so nothing is fetched. Only what pip installs lands in its site-packages."""
    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)  # noqa: S603
    (site_packages(folder) / "0-host.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def pip_install(venv: Path, *args: str) -> None:
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",  # noqa: S603
                             "--no-build-isolation", "--no-index", *args], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr


def plan_from_elsewhere(venv: Path, upstream: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / "atom-build"), "plan", "--profile", "offline", "--arch", "gfx942"],  # noqa: S603
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                          env={**env, "ATOM_BUILD_MIRROR": str(upstream)})


@pytest.mark.slow
def test_pip_install_dot_says_in_one_line_to_install_from_a_clone(fresh_clone, venv, upstream, tmp_path):
    pip_install(venv, str(fresh_clone))
    result = plan_from_elsewhere(venv, upstream, tmp_path)
    lines = result.stderr.splitlines()
    assert (result.returncode, len(lines), result.stdout) == (3, 1, ""), result.stderr
    assert "`pip install -e .`" in lines[0] and str(site_packages(venv) / "cleanbuild") in lines[0]
    assert sorted(p.name for p in site_packages(venv).iterdir() if not p.name.endswith((".pth", ".dist-info"))) == \
        ["cleanbuild"]


@pytest.mark.slow
def test_an_editable_install_plans_from_any_folder(fresh_clone, venv, upstream, tmp_path, no_engine):
    pip_install(venv, "-e", str(fresh_clone))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = plan_from_elsewhere(venv, upstream, elsewhere)
    assert result.returncode == 0, result.stderr
    assert f"-f {shlex.quote(str(fresh_clone / 'docker' / 'Dockerfile.wheels'))}" in result.stdout  # as a shell reads it
    assert not {"validation", "patches"} & {p.name for p in site_packages(venv).iterdir()}
