"""The offline profile: a stand-in base image and a local build context, so the real Dockerfiles run here.

No Docker Hub and no GitHub on this kind of machine: the base comes from mmdebstrap (Debian mirror), every
component wheel from PyPI or this disk (`pip download`), ATOM from a hand-written stand-in package in
tests/fixtures/atom_pkg. Everything is cached under a cache dir, keyed by the pins, so a re-run needs no network.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .errors import EnvironmentProblem
from .run import run

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR = REPO_ROOT / ".cache" / "offline"
ATOM_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "atom_pkg"
DOCKER_SCRIPTS = REPO_ROOT / "docker" / "scripts"

STANDIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Entries of [standin].wheels that are build tools, not runtime components: fetched, never resolved as deps.
NOT_RUNTIME = ("installer",)



def load_pins(profile=None) -> dict:
    """The offline profile's [standin] table plus its Python: what the stand-in and the context are made of."""
    from .profiles import load

    profile = profile or load("offline")
    table = profile.section("standin")
    return {
        "suite": table["suite"], "base_packages": list(table["base_packages"]), "python": profile.python,
        "platforms": list(table["platforms"]), "wheels": dict(table["wheels"]), "deps": list(table["deps"]),
    }


def pins_key(pins: dict) -> str:
    return hashlib.sha256(json.dumps(pins, sort_keys=True).encode()).hexdigest()[:12]


def standin_image_name(pins: dict | None = None) -> str:
    """The stand-in's name, keyed by (suite, packages): known without Docker, so plans stay pure."""
    pins = pins or load_pins()
    key = pins_key({"suite": pins["suite"], "packages": sorted(pins["base_packages"]), "path": STANDIN_PATH})
    return f"atom-build/standin-base:{key}"


def sources_dir(cache_dir: Path = DEFAULT_CACHE_DIR, pins: dict | None = None) -> Path:
    """Where prepare_sources puts the context for these pins (it may not exist yet)."""
    return Path(cache_dir) / f"context-{pins_key(pins or load_pins())}"


@contextlib.contextmanager
def _locked(cache_dir: Path):
    """One preparer at a time per cache dir: two builds started together must not rewrite the context under
    each other (the second waits, then finds everything in place)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_standin_base(cache_dir: Path = DEFAULT_CACHE_DIR, pins: dict | None = None) -> str:
    """The stand-in base image's name, built (mmdebstrap + docker import) when it is not there yet."""
    with _locked(cache_dir):
        return _ensure_standin_base(cache_dir, pins)


def prepare_sources(cache_dir: Path = DEFAULT_CACHE_DIR, pins: dict | None = None) -> Path:
    """The offline build context for these pins, fetched once and refreshed (ATOM stand-in, scripts) each call."""
    with _locked(cache_dir):
        return _prepare_sources(cache_dir, pins)


def _ensure_standin_base(cache_dir: Path, pins: dict | None) -> str:
    """A Debian image with Python and pip, made by mmdebstrap; built once per (suite, packages)."""
    pins = pins or load_pins()
    image = standin_image_name(pins)
    key = image.rsplit(":", 1)[1]
    if run(["docker", "image", "inspect", image], check=False, capture=True, echo=False).returncode == 0:
        return image
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tar = cache_dir / f"standin-base-{key}.tar"
    if not tar.exists():
        partial = cache_dir / f"standin-base-{key}.partial.tar"  # mmdebstrap picks the format from the suffix
        run(["mmdebstrap", "--variant=minbase", "--format=tar",
             "--include=" + ",".join(pins["base_packages"]), pins["suite"], str(partial)])
        partial.rename(tar)
    # A plain import has no config; give it the PATH every real base image has, so `ENV PATH=...:$PATH` works.
    run(["docker", "import", "--change", f"ENV PATH={STANDIN_PATH}", str(tar), image])
    return image


def _pip_download(args: list[str], dest: Path) -> None:
    run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-d", str(dest), *args])


def _platform_args(pins: dict) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", pins["python"], "--implementation", "cp"]
    for plat in pins["platforms"]:
        args += ["--platform", plat]
    return args


def _fill_component(dest: Path, requirement: str, pins: dict) -> None:
    dest.mkdir(parents=True)
    _pip_download(["--no-deps", *_platform_args(pins), requirement], dest)


def _fill_deps(local: Path, pins: dict) -> None:
    """Download the runtime closure of the component wheels (and the listed deps) into local/deps/.

    The installer (uv) is left out: it is no runtime dependency and must not pull anything into the closure.
    """
    deps = local / "deps"
    deps.mkdir()
    component_wheels = sorted(
        str(p) for name in pins["wheels"] if name not in NOT_RUNTIME for p in (local / name).glob("*.whl")
    )
    with tempfile.TemporaryDirectory() as tmp:
        # pip copies file requirements into -d too; download to tmp and keep only what is not a component.
        _pip_download([*_platform_args(pins), *component_wheels, *pins["deps"]], Path(tmp))
        own = {Path(w).name for w in component_wheels}
        for whl in Path(tmp).glob("*.whl"):
            if whl.name not in own:
                shutil.move(str(whl), deps / whl.name)


def _copy_scripts(context: Path) -> None:
    """The Dockerfiles COPY docker/scripts from the context; refresh them on every call (they are small)."""
    target = context / "docker" / "scripts"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(DOCKER_SCRIPTS, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _prepare_sources(cache_dir: Path, pins: dict | None) -> Path:
    """Return a build context holding local/<component>/ and docker/scripts/, built once per pins key."""
    pins = pins or load_pins()
    context = sources_dir(cache_dir, pins)
    local = context / "local"
    if not (context / ".complete").exists():
        if context.exists():
            shutil.rmtree(context)
        local.mkdir(parents=True)
        for name, requirement in pins["wheels"].items():
            _fill_component(local / name, requirement, pins)
        for name in ("torch", "torchvision", "torchaudio", "triton", "triton_kernels", "flydsl", "mori", "aiter",
                     "installer"):
            (local / name).mkdir(exist_ok=True)  # empty: the component is `none` offline
        _fill_deps(local, pins)
        (context / ".complete").write_text(json.dumps(pins, sort_keys=True, indent=1) + "\n")
    _refresh_atom(local / "atom")
    _copy_scripts(context)
    return context


def _refresh_atom(dest: Path) -> None:
    if not ATOM_FIXTURE.is_dir():
        raise EnvironmentProblem(f"ATOM stand-in missing at {ATOM_FIXTURE}. To fix, restore tests/fixtures/atom_pkg.")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ATOM_FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build"))


def ca_bundle() -> str | None:
    """The host CA bundle to pass as the BuildKit secret `ca` (TLS-intercepting proxies), if there is one."""
    for path in (os.environ.get("PIP_CERT"), "/etc/ssl/certs/ca-certificates.crt"):
        if path and Path(path).is_file():
            return path
    return None


if __name__ == "__main__":
    print(ensure_standin_base())
    print(prepare_sources())
