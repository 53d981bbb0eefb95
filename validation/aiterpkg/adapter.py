"""aiter's own Triton kernels from an aiter source folder, where aiter itself cannot load (no ROCm).

Used on any Triton GPU that is not an AMD GPU with aiter installed, and on the CPU under TRITON_INTERPRET=1.
It does exactly three things, one function each; every result produced through it is labelled as such
(validation.aiterpkg.triton_ops.AiterTriton.label).

1. import_source(src): puts a module object named `aiter` into sys.modules whose __path__ is src, so that
   `aiter.ops.triton.*` import from the source while aiter/__init__.py (which loads aiter's C++ ops and
   JIT-builds them with hipcc) never runs; nothing JIT-builds. One stand-in is unavoidable: the module
   `aiter.utility.dtypes`, also bound as `aiter.dtypes`. aiter/ops/triton/quant/fused_fp8_quant.py reads
   `aiter.dtypes.fp8` at import and fused_mxfp4_quant.py imports aiter.utility.dtypes, whose real module asks
   rocminfo for the GPU and loads its enums from the JIT-built module_aiter_core (aiter/ops/enum.py); the fused
   MoE (moe/moe_op.py) imports that quant package. The stand-in holds the torch dtypes those modules read, with
   `fp8` set by step 2 to the target arch's type (validation.core.archs; aiter's own dtypes table agrees).
2. set_arch(arch): sets aiter.ops.triton.utils._triton.arch_info's cached arch to the target, so aiter's config
   lookups read its own gfx942-*/gfx950-* files, and clears the functools caches of aiter's loaded Triton
   modules, whose keys leave the arch out (a process that switches arch would get the first arch's configs).
   arch_info asks Triton's driver for the arch at import; the CPU interpreter has no driver, so there, for that
   one import, a stand-in driver is active that answers get_current_target() with the target arch.
3. launch_config(config, backend): drops the launch options only AMD's Triton backend knows (the fields of
   Triton's HIPOptions that its CUDAOptions lacks: waves_per_eu, matrix_instr_nonkdim, kpack, ...) when the
   backend is not HIP. NVIDIA's backend rejects them; the interpreter ignores them.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
import types
from pathlib import Path

import torch

from validation.core.archs import ARCHS

ARCH_INFO = "aiter.ops.triton.utils._triton.arch_info"
DTYPES = "aiter.utility.dtypes"
_MARK = "__validation_adapter_source__"  # set on the stand-in package: which source it points at
# Used only when this Triton has no AMD or NVIDIA backend to read the option names from.
_AMD_ONLY_FALLBACK = frozenset({"waves_per_eu", "matrix_instr_nonkdim", "kpack", "schedule_hint",
                                "allow_flush_denorm"})


class AdapterError(RuntimeError):
    """aiter cannot be imported from the source (another aiter is already loaded, or no package there)."""


def import_source(src: Path) -> types.ModuleType:
    """Step 1: `aiter` from the package folder src (the one holding ops/), without running its __init__."""
    src = src.resolve()
    loaded = sys.modules.get("aiter")
    if loaded is not None:
        if getattr(loaded, _MARK, None) == str(src):
            return loaded
        where = getattr(loaded, _MARK, None) or getattr(loaded, "__file__", None) or "elsewhere"
        raise AdapterError(f"aiter is already imported in this process (from {where}); cannot load {src}")
    if not (src / "ops" / "triton").is_dir():
        raise AdapterError(f"{src}: no aiter package here (expected ops/triton/)")
    pkg = types.ModuleType("aiter", "aiter's package namespace from a source folder; its __init__ not run")
    pkg.__spec__ = importlib.machinery.ModuleSpec("aiter", None, is_package=True)
    pkg.__spec__.submodule_search_locations = [str(src)]
    pkg.__path__ = [str(src)]
    setattr(pkg, _MARK, str(src))
    pkg.dtypes = _dtypes_stand_in()
    sys.modules["aiter"] = pkg
    sys.modules[DTYPES] = pkg.dtypes
    return pkg


def _dtypes_stand_in() -> types.ModuleType:
    """The names aiter/utility/dtypes.py defines, as it defines them; fp8 is filled in by set_arch."""
    mod = types.ModuleType(DTYPES, "stand-in for aiter.utility.dtypes (see validation.aiterpkg.adapter)")
    fallback = torch.uint8  # aiter's _8bit_fallback for types this torch lacks
    mod.fp8 = fallback
    mod.fp8_e8m0 = getattr(torch, "float8_e8m0fnu", fallback)
    mod.fp4x2 = getattr(torch, "float4_e2m1fn_x2", fallback)
    mod.i4x2 = getattr(torch, "int4", fallback)
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32),
                        ("u32", torch.uint32), ("i32", torch.int32), ("i16", torch.int16), ("i8", torch.int8),
                        ("u8", torch.uint8), ("i64", torch.int64), ("u64", torch.uint64)):
        setattr(mod, name, dtype)
    return mod


def set_arch(arch: str, interpreting: bool) -> types.ModuleType:
    """Step 2: aiter's arch_info reports `arch`; aiter's caches keyed without the arch are emptied."""
    arch_info = sys.modules.get(ARCH_INFO) or _import_arch_info(arch, interpreting)
    arch_info._CACHED_ARCH = arch
    sys.modules[DTYPES].fp8 = getattr(torch, ARCHS[arch].fp8_dtype)
    for name, mod in list(sys.modules.items()):
        if name.startswith("aiter.ops.triton") and mod is not None:
            for value in list(vars(mod).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    if arch_info.get_arch() != arch:
        raise AdapterError(f"{ARCH_INFO}.get_arch() = {arch_info.get_arch()!r} after setting {arch!r}: this "
                           "aiter keeps its arch elsewhere than _CACHED_ARCH (the adapter follows aiter at 79366eb8, "
                           "2026-08-03)")
    return arch_info


def _import_arch_info(arch: str, interpreting: bool) -> types.ModuleType:
    if not interpreting:
        return importlib.import_module(ARCH_INFO)
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    class _TargetOnly:
        """Answers the one question arch_info asks at import; anything else fails loudly."""

        def get_current_target(self):
            return GPUTarget("hip", arch, 64)

    driver.set_active(_TargetOnly())
    try:
        return importlib.import_module(ARCH_INFO)
    finally:
        driver.set_active(None)  # back to "no active driver", as the interpreter had it


def amd_only_options() -> frozenset[str]:
    """Launch options AMD's Triton backend accepts and NVIDIA's does not, read from Triton itself."""
    try:
        from triton.backends.amd.compiler import HIPOptions
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return _AMD_ONLY_FALLBACK
    return frozenset(HIPOptions.__dataclass_fields__) - frozenset(CUDAOptions.__dataclass_fields__)


@contextlib.contextmanager
def cu_count(arch: str, backend: str):
    """aiter's Triton wrappers size some grids by the device's CU count (aiter.ops.triton.utils.device_info's
    get_num_sms: chip_info's rocminfo, else torch.cuda). Under the interpreter there is neither: every aiter module's
    get_num_sms answers the target arch's most common part's count for the duration (on a GPU, aiter asks the
    device as users' code does)."""
    if backend != "interpreter":
        yield
        return
    count = ARCHS[arch].default_cu_num
    original = importlib.import_module("aiter.ops.triton.utils.device_info").get_num_sms
    bound = [m for name, m in list(sys.modules.items())
             if name.startswith("aiter.") and m is not None and getattr(m, "get_num_sms", None) is original]
    for module in bound:
        module.get_num_sms = lambda: count
    try:
        yield
    finally:
        for module in bound:
            module.get_num_sms = original


def launch_config(config: dict, backend: str) -> tuple[dict, dict]:
    """Step 3: (the config to launch with, the options dropped). Nothing is dropped on HIP."""
    if backend == "hip":
        return dict(config), {}
    amd_only = amd_only_options()
    kept = {k: v for k, v in config.items() if k not in amd_only}
    return kept, {k: v for k, v in config.items() if k in amd_only}
