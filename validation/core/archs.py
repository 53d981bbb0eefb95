"""The one table of per-arch facts, the run's target arch, and the CK build modes: shared by validation/ and the host
package.

Standard library only (no torch): the host package imports this module as it is, and the image runs it with
whatever Python it has. Everything that differs between gfx942 and gfx950 is a field here; nothing else in
validation/ spells an arch's fp8 type, LDS size, CU count or aiter config prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ArchFacts:
    name: str  # "gfx942"
    fp8_dtype: str  # the torch attribute of the arch's native fp8 type
    fp8_max: float  # its largest finite value: what per-tensor scales map amax to
    lds_bytes: int  # LDS per CU
    cu_counts: dict[str, int]  # product -> CU count
    default_cu_num: int  # the arch's most common part, for tuned-CSV lookups without a device
    products: str
    # aiter's Triton config files for the arch: configs/gemm/<prefix>-*.json and configs/<prefix>/triton/gemm/
    # (aiter >= 2026-01 names them after get_arch() itself; arch_info maps the arch to nothing else).
    aiter_config_prefix: str
    # aiter before 2026-01 (e.g. amd-aiter 0.1.7) named them by device: arch_info._ARCH_TO_DEVICE.
    aiter_legacy_config_prefix: str

    @property
    def lds_kib(self) -> int:
        return self.lds_bytes // 1024


ARCHS: dict[str, ArchFacts] = {
    "gfx942": ArchFacts("gfx942", "float8_e4m3fnuz", 240.0, 64 * 1024,
                        {"MI300X": 304, "MI325X": 304, "MI308X": 80}, 304, "MI300X/MI325X/MI308X", "gfx942", "MI300X"),
    "gfx950": ArchFacts("gfx950", "float8_e4m3fn", 448.0, 160 * 1024, {"MI350X": 256, "MI355X": 256},
                        256, "MI350X/MI355X", "gfx950", "MI350X"),
}


def get(name: str) -> ArchFacts:
    try:
        return ARCHS[name]
    except KeyError:
        raise ValueError(f"unknown arch {name!r}; supported: {', '.join(ARCHS)}") from None


def resolve(name: str, device_arch: str | None, device_name: str) -> ArchFacts:
    """The run's target arch: the one --arch names, or the device's own for --arch auto. ValueError, in one line,
    when the name is unknown or 'auto' has no AMD GPU to ask."""
    if name == "auto":
        if not device_arch:
            raise ValueError(f"--arch auto needs an AMD GPU (device is {device_name}); pass --arch gfx942|gfx950")
        name = device_arch
    return get(name)


def arch_for_fp8_dtype(dtype_name: str) -> str | None:
    return next((a.name for a in ARCHS.values() if a.fp8_dtype == dtype_name), None)


# How aiter was built: "ck" (ENABLE_CK=1, CK kernels prebuilt) or "ckfree" (ENABLE_CK=0).
CK_MODES = ("ck", "ckfree")
CK_MODE_ENV = "ATOM_BUILD_CK_MODE"  # the image sets it to one of CK_MODES
CK_FREE_ENV = "ATOM_CK_FREE"  # ATOM's own switch; a CK-free image sets it to "1"


def ck_mode_from_env(environ: Mapping[str, str]) -> str | None:
    """The image's CK mode from its environment, or None when it says nothing.

    ATOM_BUILD_CK_MODE is read first; ATOM_CK_FREE=1 alone means "ckfree". A value outside CK_MODES, or
    ATOM_BUILD_CK_MODE=ck together with ATOM_CK_FREE=1, is a broken image: ValueError.
    """
    mode = environ.get(CK_MODE_ENV, "").strip()
    ck_free = environ.get(CK_FREE_ENV, "").strip() == "1"
    if mode:
        if mode not in CK_MODES:
            raise ValueError(f"{CK_MODE_ENV}={mode!r} is not one of {', '.join(CK_MODES)}")
        if mode == "ck" and ck_free:
            raise ValueError(f"{CK_MODE_ENV}=ck contradicts {CK_FREE_ENV}=1")
        return mode
    return "ckfree" if ck_free else None
