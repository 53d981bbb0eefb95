"""aiter's own Triton kernels for the checks: which aiter runs them, with which config, and what compiled.

On an AMD GPU with aiter installed they are imported and called as users call them. Anywhere else, given an
aiter source folder (--aiter-src, or the installed package's folder), through validation.aiterpkg.adapter; every
result then carries the adapter's label. Each launch records the config aiter picked for the target arch, the
launch options the adapter dropped, and, where Triton compiled a kernel, that kernel's shared memory.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from validation.aiterpkg import adapter
from validation.aiterpkg.locate import aiter_version
from validation.core.archs import ARCHS, ArchFacts
from validation.core.device import DeviceInfo, interpreting


@dataclass(frozen=True)
class Kernel:
    module: str  # the public entry's module
    entry: str
    jit_module: str  # where the @triton.jit kernel and aiter's config lookup live
    jit: str
    config_file: str  # aiter's config name: configs/gemm/<arch>-<config_file>.json (moe/ for the MoE)


_GEMM = "aiter.ops.triton.gemm.basic"
_GEMM_JIT = "aiter.ops.triton._triton_kernels.gemm.basic"
# The functions ATOM calls (atom/model_ops/linear.py: gemm_a8w8 for per-tensor and per-token scales,
# gemm_a8w8_blockscale for 1x128/128x128 blocks; tgemm's Triton path is gemm_a16w16) and aiter's fused MoE.
KERNELS = {
    "gemm_a16w16": Kernel(f"{_GEMM}.gemm_a16w16", "gemm_a16w16", f"{_GEMM_JIT}.gemm_a16w16",
                          "_gemm_a16_w16_kernel", "GEMM-A16W16"),
    "gemm_a8w8": Kernel(f"{_GEMM}.gemm_a8w8", "gemm_a8w8", f"{_GEMM_JIT}.gemm_a8w8", "_gemm_a8w8_kernel",
                        "GEMM-A8W8"),
    "gemm_a8w8_blockscale": Kernel(f"{_GEMM}.gemm_a8w8_blockscale", "gemm_a8w8_blockscale",
                                   f"{_GEMM_JIT}.gemm_a8w8_blockscale", "_gemm_a8w8_blockscale_kernel",
                                   "GEMM-A8W8_BLOCKSCALE"),
    "fused_moe": Kernel("aiter.ops.triton.moe.moe_op", "fused_moe", "aiter.ops.triton._triton_kernels.moe.moe_op",
                        "_fused_moe_kernel", "MOE-<dtype>"),
}


class Unavailable(Exception):
    """aiter's Triton kernels cannot run here; the message is the reason for the skip."""


class Absent(Exception):
    """The kernel's module is not in this aiter (an older or newer commit than the checks know)."""


@dataclass
class Launch:
    """What one call ran: the config as launched, what the adapter dropped, compiled shared memory per kernel."""

    config: dict[str, Any]
    dropped: dict[str, Any] = field(default_factory=dict)
    shared: list[int] = field(default_factory=list)  # empty under the interpreter
    wall_s: float = 0.0  # the first call, synchronised: Triton's compile (when new) plus the kernel
    warm_s: float | None = None  # a second, identical call: the kernel and aiter's Python around it


@dataclass
class AiterTriton:
    mode: str  # "installed" or "adapter"
    arch: ArchFacts  # the arch whose configs aiter reads (the target, through the adapter)
    info: DeviceInfo
    source: str  # where aiter came from (a folder, or "installed aiter X")
    commit: str | None
    _shared_seen: dict[tuple, list[int]] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        if interpreting():
            return "interpreter"
        return "hip" if self.info.is_amd else "cuda"

    @property
    def label(self) -> str:
        device = f"{self.info.name}, Triton interpreter" if self.backend == "interpreter" else self.info.name
        if self.mode == "installed":
            return f"aiter-triton ({self.source}, arch configs {self.arch.name}, device {device})"
        return f"aiter-triton (adapter, arch configs {self.arch.name}, device {device})"

    def entry(self, name: str) -> Callable:
        return getattr(_import(KERNELS[name].module), KERNELS[name].entry)

    def gemm_config(self, name: str, M: int, N: int, K: int) -> tuple[dict, bool]:
        """aiter's own lookup for the target arch: (config, whether a tuned N/K file had it)."""
        jit_mod = _import(KERNELS[name].jit_module)
        if name == "gemm_a8w8_blockscale":
            return jit_mod._get_config(M, N, K, backend="triton")
        return jit_mod._get_config(M, N, K)

    def moe_config(self, dtype, M: int) -> dict:
        lookup = _import("aiter.ops.triton.utils.moe_config_utils").get_optimal_moe_config_func(dtype)
        return dict(lookup(M))

    def launch(self, name: str, config: dict, call: Callable[[Callable, dict | None], Any]) -> tuple[Any, Launch]:
        """call(entry, config or None): None lets the installed aiter look its config up itself, as users do."""
        own_lookup = self.mode == "installed" and name != "fused_moe"  # fused_moe takes its config from the caller
        passed, dropped = (None, {}) if own_lookup else adapter.launch_config(config, self.backend)
        jit = getattr(_import(KERNELS[name].jit_module), KERNELS[name].jit)
        before = {id(k) for k in compiled(jit)}
        out, wall = self._timed(call, name, passed)
        # A second call runs what the first compiled: its time is the kernel's, not Triton's (GPU only).
        warm = None if self.backend == "interpreter" else self._timed(call, name, passed)[1]
        used = passed if passed is not None else config
        key = (name, tuple(sorted((k, str(v)) for k, v in used.items())))
        new = [int(k.metadata.shared) for k in compiled(jit) if id(k) not in before]
        if new:  # a config compiled once serves later shapes: remember what it needed
            self._shared_seen[key] = new
        return out, Launch(dict(used), dropped, list(self._shared_seen.get(key, [])), round(wall, 4),
                           None if warm is None else round(warm, 6))

    def _timed(self, call, name: str, config: dict | None) -> tuple[Any, float]:
        start = time.perf_counter()
        out = call(self.entry(name), config)
        if self.backend != "interpreter":
            torch.cuda.synchronize()
        return out, time.perf_counter() - start


def open_for(ctx) -> AiterTriton:
    """The aiter that runs the kernels for this check context; Unavailable(reason) when none can."""
    if ctx.aiter_installed and not ctx.aiter_from_source and ctx.info.is_amd and not interpreting():
        # As users do: the real package, __init__ and all; its arch_info asks the device.
        arch = _import(adapter.ARCH_INFO).get_arch()
        facts = ARCHS.get(arch, ctx.arch)
        return AiterTriton("installed", facts, ctx.info, f"installed aiter {aiter_version()}", ctx.aiter_commit)
    if ctx.aiter_root is None:
        raise Unavailable("no aiter to run: install it, or pass --aiter-src DIR (a checkout of ROCm/aiter)")
    if interpreting() and (why := _interpreter().runtime_loops()):
        raise Unavailable(why)
    adapter.import_source(ctx.aiter_root)
    adapter.set_arch(ctx.arch.name, interpreting())
    return AiterTriton("adapter", ctx.arch, ctx.info, str(ctx.aiter_root), ctx.aiter_commit)


def _import(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise Absent(f"{module} is not in this aiter") from e
        raise


def compiled(jit) -> list:
    """The kernels Triton compiled for a @triton.jit function (heuristics/autotune wrappers unwrapped)."""
    fn = jit
    while not hasattr(fn, "device_caches") and hasattr(fn, "fn"):
        fn = fn.fn
    caches = getattr(fn, "device_caches", {})
    return [k for cache in list(caches.values()) for k in cache[0].values()]


def _interpreter():
    # Imported on first use: its probe kernels must be decorated after the CLI sets TRITON_INTERPRET.
    from validation.core import interpreter

    return interpreter
