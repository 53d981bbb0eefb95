"""What each supported arch implies: fp8 dtype, LDS size, typical CU count, aiter config prefix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchSpec:
    name: str
    fp8_dtype: str  # attribute name on torch
    fp8_max: float
    lds_bytes: int  # LDS per CU
    cu_num: int  # the arch's most common part (MI300X/MI325X 304, MI350X/MI355X 256)
    triton_config_prefix: str  # aiter/ops/triton/configs/gemm/<prefix>-*.json


ARCHS = {
    "gfx942": ArchSpec("gfx942", "float8_e4m3fnuz", 240.0, 64 * 1024, 304, "MI300X"),
    "gfx950": ArchSpec("gfx950", "float8_e4m3fn", 448.0, 160 * 1024, 256, "MI350X"),
}


def get_arch(name: str) -> ArchSpec:
    try:
        return ARCHS[name]
    except KeyError:
        raise ValueError(f"unknown arch {name!r}; expected one of {', '.join(ARCHS)}") from None


def arch_for_fp8_dtype(dtype_name: str) -> str | None:
    return next((a.name for a in ARCHS.values() if a.fp8_dtype == dtype_name), None)
