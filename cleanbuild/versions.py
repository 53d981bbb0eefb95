"""Version strings as they come out of images, made comparable and tag-safe with packaging."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

_ROCM = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def rocm_version(raw: str | None) -> str | None:
    """'6.4.1.60401-83~24.04' -> '6.4.1'; '7.2.0' -> '7.2.0'; garbage or None -> None (never raises)."""
    if not raw:
        return None
    m = _ROCM.match(raw)
    if not m:
        return None
    major, minor, patch = m.group(1), m.group(2), m.group(3) or "0"
    return f"{int(major)}.{int(minor)}.{int(patch)}"


def normalise(raw: str | None) -> str | None:
    """PEP 440 normal form where the string is PEP 440 ('1.0.0-rc1' -> '1.0.0rc1'), else the stripped raw."""
    if raw is None:
        return None
    raw = raw.strip()
    if not raw:
        return None
    try:
        return str(Version(raw))
    except InvalidVersion:
        return raw


@dataclass(frozen=True)
class ImageVersions:
    """What the image itself says (its /opt/atom-build/versions.json)."""

    rocm: str | None
    torch: str | None
    hip: str | None
    triton: str | None
    aiter: str | None
    atom: str | None
    python: str | None
    arch: str | None
    ck: bool | None

    @classmethod
    def from_json(cls, data: dict) -> ImageVersions:
        pkgs = data.get("packages", data)
        return cls(
            rocm=rocm_version(data.get("rocm")),
            torch=normalise(_get(pkgs, "torch")),
            hip=data.get("hip") or data.get("torch_hip"),
            triton=normalise(_get(pkgs, "triton")),
            aiter=normalise(_get(pkgs, "amd-aiter") or _get(pkgs, "aiter")),
            atom=normalise(_get(pkgs, "atom")),
            python=data.get("python"),
            arch=data.get("arch") or data.get("gpu_arch"),
            ck=_ck(data),
        )


def _get(pkgs: dict, name: str) -> str | None:
    for key in (name, name.replace("-", "_"), name.replace("_", "-")):
        value = pkgs.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return value.get("version")
    return None


def _ck(data: dict) -> bool | None:
    for key in ("enable_ck", "ck", "ck_mode"):
        if key in data:
            value = data[key]
            return value in (True, 1, "1", "full", "ck") if value is not None else None
    return None
