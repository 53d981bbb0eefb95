"""The run's target arch: the one --arch names, or the device's own for --arch auto (facts: validation.archs)."""

from __future__ import annotations

from validation.archs import ARCHS, ArchFacts, get

__all__ = ["ARCHS", "ArchFacts", "resolve"]  # ARCHS re-exported for modules that import it from here


def resolve(name: str, device_arch: str | None, device_name: str) -> ArchFacts:
    """ValueError, in one line, when the name is unknown or 'auto' has no AMD GPU to ask."""
    if name == "auto":
        if not device_arch:
            raise ValueError(f"--arch auto needs an AMD GPU (device is {device_name}); pass --arch gfx942|gfx950")
        name = device_arch
    return get(name)
