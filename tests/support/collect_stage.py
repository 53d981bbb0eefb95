"""The collect stage's input as Dockerfile.wheels mounts it (/in: one folder per component image), and a run of
docker/scripts/collect_wheels.py over it: what the wheels step's manifest and the SBOM are made from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripts import load_script
from tests.support.upstream import AITER_PIN, ATOM_PIN
from tests.support.wheels import make_wheel

ARGS = {"GPU_ARCH": "gfx942", "ENABLE_CK": "0", "PREBUILD_KERNELS": "0", "AITER_TRITON_ONLY": "1",
        "TORCH_SOURCE": "local", "TORCH_VERSION": "2.13.0", "TRITON_SOURCE": "pypi", "TRITON_PACKAGE": "triton",
        "TRITON_VERSION": "3.6.0", "MORI_SOURCE": "none", "AITER_REPO": "/local/repos/aiter.git", "AITER_REF": AITER_PIN,
        "ATOM_REPO": "/local/repos/atom.git", "ATOM_REF": ATOM_PIN, "INSTALLER_SOURCE": "none",
        "LOCK_SHA256": "sha256:" + "ab" * 32, "COMPONENT_KEYS": "torch=" + "1" * 64 + " atom=" + "2" * 64}
UNSET = ("TORCHVISION_VERSION", "TORCHAUDIO_VERSION", "TORCH_INDEX_URL", "MORI_PACKAGE", "MORI_VERSION", "MORI_REPO",
         "MORI_REF", "INSTALLER_PACKAGE", "INSTALLER_VERSION")

cw = load_script("collect_wheels")


@pytest.fixture
def stage(tmp_path, monkeypatch) -> Path:
    """/in as the collect stage mounts it: one folder per component image, each with its wheels."""
    for key, value in ARGS.items():
        monkeypatch.setenv(key, value)
    for key in UNSET:
        monkeypatch.delenv(key, raising=False)
    root = tmp_path / "in"
    make_wheel(root / "torch", "torch", "2.13.0", {"torch/__init__.py": b"# torch\n"})
    make_wheel(root / "triton", "triton", "3.6.0", {"triton/__init__.py": b"# triton\n"})
    make_wheel(root / "deps", "numpy", "2.3.4")
    make_wheel(root / "deps", "flydsl", "0.2.4")
    make_wheel(root / "atom", "atom", "0.1.1.dev1+g181b0f46d")
    make_wheel(root / "aiter", "amd-aiter", "0.1.20.dev38+g79366eb81", {"aiter/__init__.py": b"", "aiter/jit/core.py": b""})
    for name, sha in (("aiter", AITER_PIN), ("atom", ATOM_PIN)):
        (root / name / "SOURCE.json").write_text(json.dumps({"sha": sha, "date": "2026-08-03T00:00:00+00:00",
                                                             "describe": "v0", "repo": f"/local/repos/{name}.git"}))
    for name in ("mori", "mori-arch", "installer", "sdists"):
        (root / name).mkdir()
    return root


def collect(stage: Path) -> tuple[list[str], Path]:
    out = stage.parent / "collected"
    return cw.collect(stage, out), out
