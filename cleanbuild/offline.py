"""The offline profile: a stand-in base image and a local build context, so the real Dockerfiles run here.

No Docker Hub and no GitHub on this kind of machine: the base comes from mmdebstrap (Debian mirror), every
component wheel from PyPI or this disk (`pip download`), ATOM from a hand-written stand-in package in
tests/fixtures/atom_pkg. Everything is cached under a cache dir, keyed by the pins, so a re-run needs no network.
"""

from __future__ import annotations

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

# The offline pins; the lead moves these into the offline profile file. `None` means the component is `none`.
OFFLINE_PINS: dict = {
    "suite": "bookworm",
    "base_packages": ["python3", "python3-venv", "python3-pip", "ca-certificates"],
    "python": "3.11",
    "platforms": ["manylinux_2_28_x86_64", "manylinux2014_x86_64"],
    "torch": "2.13.0",  # the CPU wheel kept on this disk
    "torchvision": None,  # no CPU wheel offline: TORCH_SOURCE=local with empty versions
    "torchaudio": None,
    "triton": "3.6.0",
    "aiter": "0.1.7.post2.dev18",  # real pure-Python aiter wheel (pre-fix code)
    "triton_kernels": None,
    "flydsl": None,  # on PyPI, but no cp311 CPU install worth its size here
    "mori": None,  # amd-mori-nightly has no wheel pip finds for Python 3.11
    # The runtime closure; pip adds whatever these and the component wheels require.
    "deps": [
        "numpy", "filelock", "typing-extensions", "sympy", "mpmath", "networkx", "jinja2", "MarkupSafe",
        "fsspec", "setuptools", "pybind11", "pandas", "einops", "psutil",
        "packaging",  # aiter imports it without declaring it
    ],
}


def pins_key(pins: dict) -> str:
    return hashlib.sha256(json.dumps(pins, sort_keys=True).encode()).hexdigest()[:12]


def ensure_standin_base(cache_dir: Path = DEFAULT_CACHE_DIR, pins: dict = OFFLINE_PINS) -> str:
    """A Debian image with Python and pip, made by mmdebstrap; built once per (suite, packages)."""
    key = pins_key({"suite": pins["suite"], "packages": sorted(pins["base_packages"]), "path": STANDIN_PATH})
    image = f"atom-build/standin-base:{key}"
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
    """Download the runtime closure of the component wheels (and the listed deps) into local/deps/."""
    deps = local / "deps"
    deps.mkdir()
    component_wheels = sorted(
        str(p) for name in ("torch", "triton", "aiter") for p in (local / name).glob("*.whl")
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


def prepare_sources(cache_dir: Path = DEFAULT_CACHE_DIR, pins: dict = OFFLINE_PINS) -> Path:
    """Return a build context holding local/<component>/ and docker/scripts/, built once per pins key."""
    cache_dir = Path(cache_dir)
    context = cache_dir / f"context-{pins_key(pins)}"
    local = context / "local"
    if not (context / ".complete").exists():
        if context.exists():
            shutil.rmtree(context)
        local.mkdir(parents=True)
        _fill_component(local / "torch", f"torch=={pins['torch']}", pins)
        _fill_component(local / "triton", f"triton=={pins['triton']}", pins)
        _fill_component(local / "aiter", f"amd-aiter=={pins['aiter']}", pins)
        for name in ("torchvision", "torchaudio", "triton_kernels", "flydsl", "mori"):
            (local / name).mkdir()  # empty: the component is `none` offline
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


def wheels_build_args(base_image: str, arch: str, enable_ck: bool, pins: dict = OFFLINE_PINS) -> dict[str, str]:
    """The Dockerfile.wheels build arguments of the offline profile."""
    return {
        "BASE_IMAGE": base_image,
        "GPU_ARCH": arch,
        "ENABLE_CK": "1" if enable_ck else "0",
        "PREBUILD_KERNELS": "0",  # a pure-Python aiter wheel carries no compiled kernels
        "TORCH_SOURCE": "local",
        "TORCH_VERSION": pins["torch"],
        "TORCHVISION_VERSION": pins["torchvision"] or "",
        "TORCHAUDIO_VERSION": pins["torchaudio"] or "",
        "TRITON_SOURCE": "local",
        "TRITON_VERSION": pins["triton"],
        "TRITON_KERNELS_SOURCE": "local" if pins["triton_kernels"] else "none",
        "FLYDSL_SOURCE": "local" if pins["flydsl"] else "none",
        "MORI_SOURCE": "local" if pins["mori"] else "none",
        "AITER_SOURCE": "local",
        "ATOM_SOURCE": "local",
        "DEPS_SOURCE": "local",
    }


def ca_bundle() -> str | None:
    """The host CA bundle to pass as the BuildKit secret `ca` (TLS-intercepting proxies), if there is one."""
    for path in (os.environ.get("PIP_CERT"), "/etc/ssl/certs/ca-certificates.crt"):
        if path and Path(path).is_file():
            return path
    return None


if __name__ == "__main__":
    print(ensure_standin_base())
    print(prepare_sources())
