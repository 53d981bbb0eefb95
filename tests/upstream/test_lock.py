"""cleanbuild.upstream.lock: the closure's inputs read from the pinned sources, and `invoke lock --check` against the pins.

Everything here reads the real repositories and the committed lock files; only the one `network` test runs uv."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from invoke import Program

from cleanbuild.core import run
from cleanbuild.core.errors import UsageError
from cleanbuild.upstream import lock, profiles
from cleanbuild.upstream.gitrepo import Repo
from tests.support.upstream import AITER_HEAD, AITER_PIN, ATOM_HEAD, ATOM_PIN

AITER_FULL = ["pybind11>=3.0.1", "ninja", "pandas", "einops", "psutil", "packaging", "flydsl==0.2.4"]
ATOM_DEPS = ["pybind11", "transformers==5.12.1", "zmq", "msgspec", "xxhash", "fastapi<0.137,>=0.115", "psutil",
             "protobuf", "uvicorn", "uvloop", "aiohttp", "datasets", "openpyxl", "tqdm", "setproctitle"]


@pytest.fixture(scope="module")
def aiter_setup(upstream) -> bytes:
    return Repo(str(upstream / "aiter.git")).show(AITER_PIN, "setup.py")


@pytest.fixture(scope="module")
def atom_pyproject(upstream) -> bytes:
    return Repo(str(upstream / "atom.git")).show(ATOM_PIN, "pyproject.toml")


def load(name, upstream_sets, path=None, **overrides):
    return profiles.load(name, {**upstream_sets, **overrides}, path)


# ---- inputs read from the pinned sources ----------------------------------------------------------------------

def test_aiter_requirements_are_the_full_builds_with_flydsl_substituted(aiter_setup):
    assert lock.aiter_requirements(aiter_setup, AITER_PIN) == AITER_FULL


def test_aiter_setup_requires(aiter_setup):
    assert lock.string_list(aiter_setup, "setup_requires") == ["packaging", "psutil", "ninja", "setuptools_scm",
                                                              "vcs_versioning"]


def test_atom_requirements(atom_pyproject):
    assert lock.atom_requirements(atom_pyproject, ATOM_PIN) == ATOM_DEPS


def test_atom_build_requires(atom_pyproject):
    assert lock.atom_build_requires(atom_pyproject) == ["setuptools>=61", "wheel", "setuptools_scm[toml]>=6.2"]


def test_atom_head_adds_a_dependency(upstream):
    head = lock.atom_requirements(Repo(str(upstream / "atom.git")).show(ATOM_HEAD, "pyproject.toml"), ATOM_HEAD)
    assert sorted(set(head) - set(ATOM_DEPS)) == ["prometheus_client<0.26,>=0.25"]


def test_setup_py_without_install_requires_is_refused():
    with pytest.raises(UsageError, match="aiter setup.py @ 0123456789ab has no `install_requires"):
        lock.aiter_requirements(b"from setuptools import setup\nsetup()\n", "0123456789abcdef")


def test_install_requires_with_a_computed_entry_is_refused():
    with pytest.raises(UsageError, match=r"install_requires holds get\(\), not a string"):
        lock.aiter_requirements(b"install_requires = ['a', get()]\n", "0123456789ab")


def test_pyproject_without_dependencies_is_refused():
    with pytest.raises(UsageError, match="ATOM pyproject.toml @ 0123456789ab has no \\[project\\].dependencies"):
        lock.atom_requirements(b"[project]\nname = 'atom'\n", "0123456789ab")


def test_torch_requirements_drop_the_local_label():
    assert lock.torch_requirements(profiles.load("default")) == ["torch==2.11.0", "torchvision==0.26.0",
                                                                 "torchaudio==2.11.0"]


def test_lock_files_sit_beside_the_profile(profile_dir):
    prof = profiles.load("offline", path=profile_dir / "offline.toml")
    assert lock.lock_paths(prof) == (profile_dir / "offline.lock", profile_dir / "offline.build.lock")


# ---- the committed locks against their pins --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["offline", "default"])
def test_committed_lock_matches_the_pins(name, upstream_sets):
    assert lock.check(load(name, upstream_sets)) == []


def test_lock_is_stale_when_the_aiter_pin_moves(upstream_sets):
    problems = lock.check(load("offline", upstream_sets, **{"components.aiter.ref": AITER_HEAD}))
    assert problems[0] == f"lock aiter_ref: {AITER_PIN!r} != pins {AITER_HEAD!r}"
    assert [p for p in problems if p.startswith("lock aiter:") and "flydsl==0.3.1" in p]


def test_lock_is_stale_when_the_atom_pin_moves(upstream_sets):
    problems = lock.check(load("default", upstream_sets, **{"components.atom.ref": ATOM_HEAD}))
    assert problems[0] == f"lock atom_ref: {ATOM_PIN!r} != pins {ATOM_HEAD!r}"
    assert [p for p in problems if p.startswith("lock atom:") and "prometheus_client" in p]


def test_lock_is_stale_when_the_python_changes(upstream_sets):
    assert lock.check(load("offline", upstream_sets, python="3.12")) == ["lock python: '3.11' != pins '3.12'"]


def test_missing_lock_is_reported(profile_dir, upstream_sets):
    (profile_dir / "offline.lock").unlink()
    problems = lock.check(load("offline", upstream_sets, profile_dir / "offline.toml"))
    assert len(problems) == 1 and "offline.lock is missing or has no atom-build-lock header" in problems[0]


def test_build_lock_from_another_run_is_reported(profile_dir, upstream_sets):
    build = profile_dir / "offline.build.lock"
    build.write_text(build.read_text().replace('"python": "3.11"', '"python": "3.10"', 1))
    problems = lock.check(load("offline", upstream_sets, profile_dir / "offline.toml"))
    assert len(problems) == 1 and "offline.build.lock was not made with offline.lock" in problems[0]


@pytest.mark.parametrize("name", ["offline", "default"])
def test_locked_flydsl_is_what_aiter_pins(name, aiter_setup):
    flydsl = re.search(r'^FLYDSL_VERSION = "flydsl==(.+)"$', aiter_setup.decode(), re.MULTILINE).group(1)
    runtime, _ = lock.lock_paths(profiles.load(name))
    assert lock.packages(runtime)["flydsl"] == flydsl == "0.2.4"


def test_digest_follows_the_lock_bytes(profile_dir):
    prof = profiles.load("offline", path=profile_dir / "offline.toml")
    before = lock.digest(prof)
    (profile_dir / "offline.build.lock").write_text((profile_dir / "offline.build.lock").read_text() + "\n")
    assert lock.digest(prof) != before


# ---- `invoke lock --check`, in-process ------------------------------------------------------------------------

def run_lock(*argv) -> int:
    import tasks

    with pytest.raises(SystemExit) as info:
        Program(namespace=tasks.ns, version="test").run(["invoke", "lock", "--check", *argv])
    return info.value.code


def test_check_exits_1_when_the_lock_no_longer_matches_the_pins(upstream_sets, capsys, monkeypatch):
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)
    sets = [x for k, v in {**upstream_sets, "components.aiter.ref": AITER_HEAD}.items() for x in ("--set", f"{k}={v}")]
    assert run_lock("--profile", "offline", *sets) == 1
    assert "lock stale: lock aiter_ref" in capsys.readouterr().err


def test_check_passes_on_the_committed_lock(upstream_sets, capsys, monkeypatch):
    import tasks

    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)
    sets = [x for k, v in upstream_sets.items() for x in ("--set", f"{k}={v}")]
    Program(namespace=tasks.ns, version="test").run(["invoke", "lock", "--check", "--profile", "offline", *sets])
    assert "offline.lock matches the pins of offline" in capsys.readouterr().err


# ---- regenerating (uv, PyPI) ----------------------------------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("name", ["offline", "default"])
def test_regenerated_lock_is_byte_identical(profile_dir, upstream_sets, name):
    """The closure resolves against PyPI as the wheels stage downloads it (binary only for the base's Python and
    platform, zmq from its sdist), ROCm-only packages aside, and gives exactly the committed lock."""
    if shutil.which("uv") is None and run._beside_python("uv") is None:  # found as cleanbuild.core.run finds it
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and uv (the lock resolver) is not installed", pytrace=False)
        pytest.skip("uv is not installed")
    runtime, build = lock.write(load(name, upstream_sets, profile_dir / f"{name}.toml"))
    committed = profiles.PROFILE_DIR
    assert (runtime.read_bytes() == (committed / f"{name}.lock").read_bytes(),
            build.read_bytes() == (committed / f"{name}.build.lock").read_bytes()) == (True, True)
