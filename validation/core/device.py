"""The one place that knows about ROCm vs CUDA vs CPU: arch detection and fp8 support probing.

Everything else uses the torch "cuda" device API, which is HIP on ROCm builds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from validation.core.archs import ARCHS


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "cuda" (HIP on ROCm)
    vendor: str  # "amd", "nvidia" or "cpu"
    name: str
    gcn_arch: str | None  # "gfx942" with target features stripped; None off AMD
    cu_num: int | None
    capability: tuple[int, int] | None

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda" if self.kind == "cuda" else "cpu")


def cuda_available() -> bool:
    return torch.cuda.is_available()


def detect(kind: str) -> DeviceInfo:
    if kind == "cpu":
        return DeviceInfo("cpu", "cpu", "cpu", None, None, None)
    if not cuda_available():
        raise RuntimeError("--device cuda asked for, but torch sees no GPU (torch.cuda.is_available() is False)")
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip is not None:
        # gcnArchName looks like "gfx942:sramecc+:xnack-"; the features do not change kernels we pick.
        arch = getattr(props, "gcnArchName", "").split(":")[0] or None
        return DeviceInfo("cuda", "amd", props.name, arch, props.multi_processor_count, None)
    cap = (props.major, props.minor)
    return DeviceInfo("cuda", "nvidia", props.name, None, props.multi_processor_count, cap)


def interpreting() -> bool:
    """Triton kernels run through the numpy interpreter (the CPU path)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def fp8_native(dtype_name: str, info: DeviceInfo) -> tuple[bool, str]:
    """Can our Triton kernels take this fp8 dtype natively here? If not, the caller emulates in torch."""
    if info.kind == "cpu":
        # The interpreter knows fp8e4nv (e4m3fn) but has no IR type for fp8e4b8 (e4m3fnuz).
        if dtype_name == "float8_e4m3fn":
            return True, "Triton interpreter on CPU (numpy), not hardware fp8"
        return False, f"{dtype_name} not supported by the Triton interpreter"
    if info.is_amd:
        # An AMD arch's matrix cores take its own fp8 type only (gfx942 fnuz, gfx950 OCP e4m3fn).
        facts = ARCHS.get(info.gcn_arch or "")
        ok = facts is not None and facts.fp8_dtype == dtype_name
        return ok, "" if ok else f"{dtype_name} not native on {info.gcn_arch}"
    if dtype_name == "float8_e4m3fn" and info.capability and info.capability >= (8, 9):
        return True, ""
    return False, f"{dtype_name} not native on NVIDIA sm{''.join(map(str, info.capability or ()))}"
