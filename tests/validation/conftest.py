"""CPU by default: our Triton kernels run through the interpreter, so set it before any kernel module loads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from tests.support.upstream import AITER_PIN, ATOM_PIN  # noqa: E402 - the profiles' pin (tests/upstream/test_profiles.py)
from tests.support.wheels import pip_download  # noqa: E402
from validation.checks.context import Context  # noqa: E402
from validation.core.archs import get as get_arch  # noqa: E402 - after TRITON_INTERPRET on purpose
from validation.core.device import detect  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
AITER_WHEEL = "amd-aiter==0.1.7.post2.dev18"
WHEEL_CACHE = REPO / ".cache" / "pypi"


def pytest_configure(config):
    # numpy 2.3 warns where triton 3.6's interpreter turns a 1-element array into a loop bound (2.4 raises:
    # validation.core.interpreter.runtime_loops says so). aiter's kernels hit it on every K loop.
    config.addinivalue_line("filterwarnings", "ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def missing(reason: str):
    """A resource CI must have: fail there (CI=true), skip with the reason elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def cpu_ctx():
    """A Context for the CPU; keyword overrides per test."""

    def make(arch: str = "gfx942", **kw) -> Context:
        return Context(arch=get_arch(arch), info=detect("cpu"), **kw)

    return make


@pytest.fixture
def run_cli():
    """Runs `python -m validation ARGS` in a subprocess on the CPU; returns the CompletedProcess."""

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if k not in ("GPU_ARCHS", "AITER_CONFIG_GEMM_BF16")}
        full_env["TRITON_INTERPRET"] = "1"
        full_env.update(env or {})
        return subprocess.run([sys.executable, "-m", "validation", *args], cwd=REPO, env=full_env,  # noqa: S603
                              capture_output=True, text=True, timeout=300, check=False)

    return run


def checkout_aiter(dest: Path, commit: str, paths: tuple[str, ...] = ("/aiter/",), repo: str = "aiter.git") -> Path:
    """A sparse checkout of the real aiter (or, with repo="atom.git", ATOM) at commit (only paths), from the shared
    bare repository.

    Skips (fails when CI=true) without git or the repository; ATOM_BUILD_MIRROR names the folder holding it.
    """
    upstream = Path(os.environ.get("ATOM_BUILD_MIRROR") or REPO / ".." / "shared" / "upstream").resolve()
    bare = upstream / repo
    if shutil.which("git") is None or not bare.is_dir():
        missing(f"no git or no {bare} (set ATOM_BUILD_MIRROR to the folder holding {repo})")
    git = ["git", "-c", "safe.directory=*", "-c", "advice.detachedHead=false"]
    subprocess.run([*git, "init", "-q", str(dest)], check=True, capture_output=True, timeout=120)  # noqa: S603
    # The shared repository's objects borrowed (alternates), not cloned: git clones a shallow repository by
    # packing and indexing all its objects again (0.9 s a checkout); the checkout only reads what it writes out.
    (dest / ".git" / "objects" / "info" / "alternates").write_text(f"{bare / 'objects'}\n")
    if (bare / "shallow").is_file():
        shutil.copyfile(bare / "shallow", dest / ".git" / "shallow")
    for args in (["-C", str(dest), "sparse-checkout", "set", "--no-cone", *paths],
                 ["-C", str(dest), "checkout", "-q", commit]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)  # noqa: S603
    return dest


@pytest.fixture(scope="session")
def aiter_checkout(tmp_path_factory) -> Path:
    """A checkout of the real aiter at the pin, from the shared bare repository (only aiter/ checked out)."""
    return checkout_aiter(tmp_path_factory.mktemp("aiter-pin") / "aiter", AITER_PIN)


@pytest.fixture(scope="session")
def site(tmp_path_factory, aiter_pkg) -> Path:
    """A folder as an image's site-packages holds them: the real atom/ and aiter/ at the pins (links to checkouts),
    for what reads their code without importing it (validation.routing)."""
    atom = checkout_aiter(tmp_path_factory.mktemp("atom-pin") / "atom", ATOM_PIN, ("/atom/",), repo="atom.git")
    folder = tmp_path_factory.mktemp("site")
    (folder / "atom").symlink_to(atom / "atom")
    (folder / "aiter").symlink_to(aiter_pkg)
    return folder


@pytest.fixture(scope="session")
def aiter_at(tmp_path_factory):
    """at(commit, paths) -> a sparse checkout of the real aiter at commit holding only paths."""

    def at(commit: str, paths: tuple[str, ...] = ("/aiter/",)) -> Path:
        return checkout_aiter(tmp_path_factory.mktemp(f"aiter-{commit[:8]}") / "aiter", commit, paths)

    return at


@pytest.fixture(scope="session")
def aiter_pin() -> str:
    return AITER_PIN


@pytest.fixture(scope="session")
def aiter_pkg(aiter_checkout) -> Path:
    """The checkout's aiter/ package folder, what --aiter-src resolves to."""
    return aiter_checkout / "aiter"


@pytest.fixture(scope="session")
def patched_copy(tmp_path_factory):
    """copy(pkg) -> a copy of the aiter package folder pkg, with every patch applied by the real CLI."""

    def copy(pkg: Path) -> Path:
        dest = tmp_path_factory.mktemp("patched")
        shutil.copytree(pkg, dest / "aiter")
        proc = subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(dest)], cwd=REPO,  # noqa: S603
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return dest / "aiter"

    return copy


@pytest.fixture(scope="session")
def pin_patched(aiter_pkg, patched_copy) -> Path:
    """aiter at the pin, patched; once per session: the lookup and dispatch tests only read it."""
    return patched_copy(aiter_pkg)


@pytest.fixture(scope="session")
def interpreter_runs_aiter() -> None:
    """aiter's kernels loop over runtime arguments; triton 3.6's interpreter needs numpy<2.4 for that."""
    from validation.core import interpreter

    why = interpreter.runtime_loops()
    if why:
        missing(why)


def _aiter_modules() -> dict:
    return {k: v for k, v in sys.modules.items() if k == "aiter" or k.startswith("aiter.")}


@pytest.fixture
def stash_aiter_modules():
    """Every aiter module out of sys.modules for one test, and back after it; what the test loaded goes.

    Whatever aiter another test loaded stays loaded for the session; the real source at the pin is loaded only in a
    process of its own (tests/support/aiter_loaded.py: aiter's torch ops break torch's exit hook).
    """
    saved = _aiter_modules()
    for name in saved:
        del sys.modules[name]
    yield
    for name in _aiter_modules():
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.fixture(scope="session")
def aiter_wheel_root(tmp_path_factory) -> Path:
    """The real pure-Python aiter wheel from PyPI (cached under .cache/pypi), its aiter/ unpacked; returns aiter/.
    The checks read nothing beside it: aiter_meta/ (160 MB of kernels and sources, 8,400 files) stays in the zip."""
    wheels = sorted(WHEEL_CACHE.glob("amd_aiter-*.whl"))
    if not wheels:
        pip_download(AITER_WHEEL, WHEEL_CACHE).check_returncode()
        wheels = sorted(WHEEL_CACHE.glob("amd_aiter-*.whl"))
    dest = tmp_path_factory.mktemp("aiter-wheel")
    with zipfile.ZipFile(wheels[-1]) as z:
        z.extractall(dest, members=[name for name in z.namelist() if name.startswith("aiter/")])
    return dest / "aiter"
