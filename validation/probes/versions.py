"""Versions of what matters, from /opt/atom-build/versions.json when this repo built the image, else metadata."""

from __future__ import annotations

import platform

from validation.probes import prebuilt, pyenv
from validation.probes.image import Image

# Component -> distribution names, first found wins (as docker/scripts/write_versions.py reads them).
DISTRIBUTIONS = {
    "torch": ("torch",),
    "triton": ("triton", "pytorch-triton-rocm", "triton-rocm"),
    "aiter": ("amd-aiter", "aiter"),
    "atom": ("atom", "amd-atom"),
    "flydsl": ("flydsl",),
    "mori": ("amd-mori-nightly", "mori", "amd-mori"),
}


def versions(ctx: Image) -> dict:
    recorded = ctx.read_json("/opt/atom-build/versions.json")
    if recorded:
        return {"source": "/opt/atom-build/versions.json", **recorded}
    found: dict[str, object] = {name: pyenv.dist_version(ctx, *names) for name, names in DISTRIBUTIONS.items()}
    torch = pyenv.torch_build(ctx)
    found.update({
        "torch_hip": torch.get("hip"),
        "rocm": prebuilt.rocm_version(ctx),
        "python": platform.python_version() if ctx.python else None,
        "source": "package metadata (no /opt/atom-build/versions.json)",
    })
    return found
