"""noxfile.py: where the test tier's CPU torch comes from, and what a user sees when it is not there."""

from __future__ import annotations

import os
import subprocess
import sys

import nox
import pytest
from packaging.requirements import Requirement

import noxfile

CPU = "https://download.pytorch.org/whl/cpu"


class Session:
    """What _install_torch asks of nox's session: install (recorded, or failing as pip would) and error."""

    def __init__(self, fails: bool = False):
        self.fails, self.installs = fails, []

    def install(self, *args: str, silent: bool = False) -> None:
        self.installs.append(args)
        if self.fails:
            raise nox.command.CommandFailed("Returned code 1", return_code=1)

    def error(self, message: str) -> None:
        raise SystemExit(message)


def test_the_validation_group_pins_the_cpu_build_by_its_local_label():
    torch = next(Requirement(r) for r in nox.project.dependency_groups(noxfile.PYPROJECT, "validation")
                 if Requirement(r).name == "torch")
    assert str(torch.specifier) == "==2.13.0+cpu"


def test_by_default_torch_comes_from_pytorchs_cpu_index_and_nowhere_else(monkeypatch):
    monkeypatch.delenv(noxfile.TORCH_INDEX_ENV, raising=False)
    session = Session()
    noxfile._install_torch(session, "torch==2.13.0+cpu")
    assert session.installs == [("-qqq", "--no-deps", "--index-url", CPU, "torch==2.13.0+cpu")]


def test_the_override_names_a_mirror_or_a_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(noxfile.TORCH_INDEX_ENV, str(tmp_path))
    session = Session()
    noxfile._install_torch(session, "torch==2.13.0+cpu")
    assert session.installs == [("-qqq", "--no-deps", "--no-index", "--find-links", str(tmp_path), "torch==2.13.0+cpu")]


def test_no_torch_there_is_one_line_naming_the_wheel_where_and_the_override(monkeypatch, tmp_path):
    monkeypatch.setenv(noxfile.TORCH_INDEX_ENV, str(tmp_path))
    with pytest.raises(SystemExit) as info:
        noxfile._install_torch(Session(fails=True), "torch==2.13.0+cpu")
    assert str(info.value) == (f"torch==2.13.0+cpu (PyTorch's CPU build) was not found at {tmp_path}. To fix, set "
                               f"ATOM_BUILD_TORCH_INDEX to a mirror of {CPU} or to a folder holding its wheel for "
                               "this Python.")


def test_pip_itself_names_only_the_missing_wheel(tmp_path):
    """The arguments the session passes, to this Python's real pip (a dry run) with a folder that lacks the wheel:
    it fails naming torch==2.13.0+cpu and nothing else (torch alone, --no-deps: no resolver dump about triton or
    CUDA packages), and the session's own line follows."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--disable-pip-version-check",
            *noxfile.torch_install_args("torch==2.13.0+cpu", str(tmp_path))]
    bare = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}  # a pip with no configuration of its own
    result = subprocess.run(argv, capture_output=True, text=True, check=False,  # noqa: S603
                            env={**bare, "PIP_CONFIG_FILE": os.devnull})
    lines = (result.stdout + result.stderr).splitlines()
    assert (result.returncode, lines[-1]) == (1, "ERROR: No matching distribution found for torch==2.13.0+cpu")
    assert all("torch==2.13.0+cpu" in line for line in lines), lines
