"""Triton's own hooks for compiling ahead and for proving a cache serves, kept here so no other module touches
Triton's internals (Triton 3.6: triton.runtime.driver, JITFunction.run, knobs.compilation.listener).

- Target: where kernels are compiled for. `hip:gfx950` (warp 64) for an image; `cuda:90` (warp 32) for the
  NVIDIA demonstration. A ROCm target differs from a CUDA one only in this string.
- StandInDriver: answers what JITFunction.run and create_binder ask of triton.runtime.driver.active (the
  current device, stream and target) with no GPU and no driver library; anything else fails loudly.
- compile_only(): every launch becomes JITFunction's warmup (compile, store in the cache, never launch), so aiter's
  own Python (configs, grids, the split-K reduce after the GEMM) runs as users call it and nothing reaches a GPU.
- listening(): Triton's compilation listener, called for every kernel Triton resolves from its source: each
  event says which kernel, its cache hash, whether the on-disk cache had it, and how long it took.
- stubs: Triton's launcher and driver modules are C compiled at first use (needing a compiler and Python's
  headers); made here for each compiled kernel through the real driver's classes, they land in the same cache.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction

WARPS = {"hip": 64, "cuda": 32}


@dataclass(frozen=True)
class Target:
    backend: str  # "hip" or "cuda"
    arch: str  # "gfx950", or "90" for sm_90

    @classmethod
    def parse(cls, text: str) -> Target:
        backend, _, arch = text.partition(":")
        if backend not in WARPS or not arch:
            raise ValueError(f"target {text!r} is not hip:<gfx arch> or cuda:<compute capability> (e.g. hip:gfx950, "
                             "cuda:90)")
        return cls(backend, arch)

    def gpu_target(self) -> GPUTarget:
        arch: str | int = int(self.arch) if self.backend == "cuda" else self.arch
        return GPUTarget(self.backend, arch, WARPS[self.backend])

    def __str__(self) -> str:
        return f"{self.backend}:{self.arch}"


class StandInDriver:
    """triton.runtime.driver.active with no GPU: device 0, stream 0, and the target."""

    def __init__(self, target: Target):
        self.target = target.gpu_target()

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def __getattr__(self, name: str):
        raise AttributeError(f"the stand-in Triton driver (validation.warmcache.hooks) has no {name}: Triton asked "
                             "for more than a compile needs")


@contextlib.contextmanager
def stand_in(target: Target) -> Iterator[None]:
    driver.set_active(StandInDriver(target))
    try:
        yield
    finally:
        driver.set_active(None)  # no active driver, as before: the default one needs a GPU


@contextlib.contextmanager
def compile_only() -> Iterator[None]:
    """Every JITFunction launch (`kernel[grid](...)`) compiles and returns without launching."""
    run = JITFunction.run

    def warmup(self, *args, grid, warmup, **kwargs):  # noqa: ARG001 - warmup is what this forces
        return run(self, *args, grid=grid, warmup=True, **kwargs)

    JITFunction.run = warmup
    try:
        yield
    finally:
        JITFunction.run = run


@dataclass(frozen=True)
class Event:
    kernel: str  # the @triton.jit function's name
    hash: str  # Triton's cache key for it (the folder under TRITON_CACHE_DIR is its base32 form)
    cache_hit: bool
    seconds: float
    shared: int  # shared memory (LDS) the compiled kernel uses


@dataclass
class Listener:
    events: list[Event] = field(default_factory=list)
    sources: list[tuple] = field(default_factory=list)  # (src, metadata_group, hash) per event: see compiled()

    def __call__(self, *, src, metadata, metadata_group, times, cache_hit) -> None:
        total = getattr(times, "total", None)
        seconds = total / 1e6 if isinstance(total, int | float) else 0.0
        digest = str(metadata.get("hash", ""))
        self.events.append(Event(getattr(src, "name", "?"), digest, bool(cache_hit), round(seconds, 4),
                                 int(metadata.get("shared", 0) or 0)))
        self.sources.append((src, dict(metadata_group), digest))


def compiled(source: tuple):
    """The CompiledKernel an event stands for, as Triton makes it from its cache (its launcher is built from it)."""
    from triton.compiler.compiler import CompiledKernel

    return CompiledKernel(*source)


@contextlib.contextmanager
def knob(group, name: str, value) -> Iterator[None]:
    """One of Triton's knobs set for a block, and put back."""
    before = getattr(group, name)
    setattr(group, name, value)
    try:
        yield
    finally:
        setattr(group, name, before)


@contextlib.contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    with knob(triton.knobs.compilation, "listener", listener):
        yield listener


class Miss(Exception):
    """A kernel (or C module) the cache does not hold, met where Triton would compile it."""

    def __init__(self, name: str, key: str):
        super().__init__(f"{name} is not in the cache ({key[:12]})")
        self.name, self.key = name, key


class _ReadOnlyCache:
    """Triton's FileCacheManager for reading only: a kernel that is not there is a Miss before anything compiles,
    and nothing is created or written in the cache (it may be read-only, or another user's)."""

    def __new__(cls, key: str, override: bool = False, dump: bool = False):
        from triton.runtime.cache import FileCacheManager

        class ReadOnly(FileCacheManager):
            def __init__(self, key, override=False, dump=False):  # noqa: ARG002 - FileCacheManager's signature
                self.key, self.lock_path = key, None
                self.cache_dir = os.path.join(triton.knobs.cache.dir, key)  # not made: a miss makes nothing

            def get_group(self, filename):
                group = super().get_group(filename)
                if group is None:
                    raise Miss(filename.removesuffix(".json"), self.key)
                return group

            def put(self, data, filename, binary=True):
                raise Miss(filename, self.key)

        return ReadOnly(key, override, dump)


@contextlib.contextmanager
def reading_only() -> Iterator[None]:
    """Triton reads its cache and never compiles into it: a kernel it lacks raises Miss (see _ReadOnlyCache)."""
    with knob(triton.knobs.cache, "manager_class", _ReadOnlyCache):
        yield


def cache_invalidating_env() -> dict[str, str]:
    """The environment that enters every kernel's cache key: a run with other values finds none of the cache."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return dict(sorted(get_cache_invalidating_env_vars().items()))


def cache_dir() -> str:
    return str(triton.knobs.cache.dir)


# ---- launcher and driver stubs ----------------------------------------------------------------------------------

def stub_makers(target: Target):
    """(make the driver's utilities module, the launcher class) for the target's real driver, or a reason why not
    (no HIP runtime library to name in the stub, no C compiler)."""
    if target.backend == "hip":
        from triton.backends.amd import driver as amd

        try:
            amd._get_path_to_hip_runtime_dylib()
        except RuntimeError as e:
            return None, f"no HIP runtime in this image ({str(e).split(' after ', 1)[0]})"
        return (amd.HIPUtils, amd.HIPLauncher), ""
    from triton.backends.nvidia import driver as nvidia

    return (nvidia.CudaUtils, nvidia.CudaLauncher), ""


def make_stubs(makers, kernels: list) -> tuple[int, str]:
    """The driver's utilities once and a launcher per compiled kernel, into the cache: (launchers made, error)."""
    utils, launcher = makers
    try:
        utils()
        for kernel in kernels:
            launcher(kernel.src, kernel.metadata)
    except Exception as e:  # noqa: BLE001 - a compiler that is missing or fails is the finding, named
        first = str(e).splitlines()[0] if str(e) else ""
        return 0, f"{type(e).__name__}: {first}"
    return len(kernels), ""


@contextlib.contextmanager
def no_compiler() -> Iterator[None]:
    """Triton's C builds refused (knobs.build.impl), as in a runtime image with no C compiler: a stub that is not in
    the cache fails naming itself."""

    def refuse(name, *args, **kwargs):  # noqa: ARG001
        raise RuntimeError(f"Triton wanted to compile its C module {name}: no C compiler in this run")

    with knob(triton.knobs.build, "impl", refuse):
        yield
