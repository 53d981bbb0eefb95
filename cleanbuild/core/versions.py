"""Version strings as they come out of images, made comparable and tag-safe with packaging."""

from __future__ import annotations

import re

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


def rocm_minor(raw: str | None) -> str | None:
    """'7.2.0', '7.2', '7.2.0.70200-43~24.04' -> '7.2': the release line AMD's driver matrix is keyed by.

    Read through rocm_version, so both keys of one ROCm string come from the one parser.
    """
    release = rocm_version(raw)
    return release.rsplit(".", 1)[0] if release else None


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
