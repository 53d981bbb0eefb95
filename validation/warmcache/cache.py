"""warm() and check(): the two things done with a Triton cache, each on a Request, each returning a JSON-able dict.

warm: plan the calls for every model, make them compile-only into the cache, make the launcher stubs where a HIP
runtime (or CUDA's) and a C compiler are there, and describe the result (the manifest). check: plan the same calls
again (for the models and tensor-parallel sizes the manifest names, else the request's), make them with Triton's
cache manager reading only (hooks.reading_only: a kernel the cache lacks is named before anything compiles) and the
listener on, and list every kernel that was not there; then the launcher stubs with Triton's C compiler refused, so
a launcher missing from the cache is named too.
"""

from __future__ import annotations

import atexit
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validation.warmcache import plan as plans

MANIFEST = Path("/opt/atom-build/triton-cache.json")


@dataclass(frozen=True)
class Request:
    arch: str
    ck_mode: str
    models: tuple[str, ...]
    tp: tuple[int, ...]
    target: str  # hooks.Target text: hip:<arch> by default
    cache: Path
    aiter_pkg: Path
    cu_num: int
    jobs: int = 1  # warm: processes that compile at once
    reuse: Path | None = None  # warm: the build machine's Triton cache behind the image's (validation.warmcache.reuse)


def triton_version() -> str:
    import triton

    return triton.__version__


def triton_build() -> str:
    """Triton's own hash of its installed files (the first part of every kernel's cache key), shortened: two builds
    of one version differ here."""
    import hashlib

    from triton.runtime.cache import triton_key

    return hashlib.sha256(triton_key().encode()).hexdigest()[:16]


def launcher_key() -> str:
    """Triton's key for its C modules (the launcher stubs, the driver module) beside their source: the platform,
    with platform.architecture()'s linkage, which Python reads by running `file` (without it on PATH the key
    changes and every cached launcher is missed)."""
    try:
        from triton.runtime.build import platform_key
    except ImportError:  # a Triton without it keys its C modules by their source alone
        return ""
    return platform_key()


def make_plans(req: Request) -> list[plans.Plan]:
    """The calls for every model, with aiter's bounds and tuned dispatch read from the image's aiter (call inside
    hooks.stand_in, aiter opened)."""
    import importlib

    from validation.aiterpkg import tuned_csv, tuned_lookup

    bounds = tuple(importlib.import_module("aiter.ops.triton.utils.gemm_config_utils").STANDARD_M_BOUNDS)
    m_values, m_from = plans.m_values(plans.atom_package(), bounds)
    csvs, _ = tuned_csv.tuned_paths(None, req.aiter_pkg)
    with tuned_lookup.load(req.aiter_pkg, req.arch, req.cu_num, [p for p in csvs if p.is_file()]) as lookup:
        def libtype(M: int, N: int, K: int) -> str:
            return str(lookup.config(M, N, K).get("libtype"))

        return [plans.make(m, req.arch, req.ck_mode, list(req.tp), m_values, m_from, libtype) for m in req.models]


def warm(req: Request) -> dict[str, Any]:
    from validation.warmcache import hooks, manifest, replay, reuse

    start = time.perf_counter()
    target = hooks.Target.parse(req.target)
    os.environ["TRITON_CACHE_DIR"] = str(req.cache)
    with hooks.stand_in(target), reuse.behind(req.reuse):
        replay.open_aiter(req.aiter_pkg, req.arch)
        planned = make_plans(req)
        calls = sorted({c for p in planned for c in p.calls})
        ahead = _in_parallel(req, calls) if req.jobs > 1 else []
        done = replay.replay(calls, req.arch, target, keep_kernels=True)
    compile_s = time.perf_counter() - start
    events = [*ahead, *done.events]
    makers, why_no_stubs = hooks.stub_makers(target)
    with reuse.behind(req.reuse):
        stubs, stub_error = hooks.make_stubs(makers, [hooks.compiled(k) for k in done.kernels]) if makers else (0, "")
    held = manifest.read_cache(req.cache)
    return {"arch": req.arch, "ck_mode": req.ck_mode, "target": str(target), "triton": triton_version(),
            "triton_build": triton_build(), "launcher_key": launcher_key(), "env": hooks.cache_invalidating_env(),
            "models": list(req.models), "tp": list(req.tp),
            "plans": [p.to_json() for p in planned], "calls": len(calls),
            "kinds": sorted({e.kernel for e in done.events}),
            "kernels_compiled": len({e.hash for e in events if not e.cache_hit}),
            "kernels": len({e.hash for e in done.events}), "failures": done.failures, "jobs": req.jobs,
            "stubs": {"launchers": stubs, "error": stub_error, "not_made": why_no_stubs, "files": held["stubs"]},
            "cache": {"path": str(req.cache), "bytes": held["bytes"], "by_arch": held["by_arch"],
                      "code_objects": len(held["kernels"])},
            "seconds": {"compile": round(compile_s, 2), "total": round(time.perf_counter() - start, 2)}}


def _in_parallel(req: Request, calls: list[plans.TritonCall]) -> list:
    """The compiles spread over req.jobs fresh processes (one group of calls per layer shape, so a shape's variants
    share a process); their events. The cache is Triton's own folder, written by key with atomic renames."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    groups: dict[tuple, list[plans.TritonCall]] = {}
    for call in calls:
        groups.setdefault((call.entry, call.N, call.K, call.experts), []).append(call)
    chunks: list[list[plans.TritonCall]] = [[] for _ in range(req.jobs)]
    for i, group in enumerate(sorted(groups.values(), key=len, reverse=True)):
        min(chunks, key=len).extend(group) if i >= req.jobs else chunks[i].extend(group)
    with ProcessPoolExecutor(req.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_compile_chunk, [(req, chunk) for chunk in chunks if chunk]))
    return [event for events in done for event in events]


def _compile_chunk(job: tuple[Request, list[plans.TritonCall]]) -> list:
    from validation.warmcache import hooks, replay, reuse

    req, calls = job
    os.environ["TRITON_CACHE_DIR"] = str(req.cache)
    target = hooks.Target.parse(req.target)
    with hooks.stand_in(target), reuse.behind(req.reuse):
        replay.open_aiter(req.aiter_pkg, req.arch)
        events = replay.replay(calls, req.arch, target).events
    # Registered after aiter's ops, so it runs before torch's exit hook, which fails on aiter::aiter::gemm_a16w16_
    # (see validation/tritoncache.py): the worker has delivered its events by then.
    atexit.register(os._exit, 0)
    return events


def check(req: Request, warmed: dict[str, Any] | None) -> dict[str, Any]:
    """First use, reading the cache and never writing it: every kernel a cache hit, or the ones it lacks (met
    before anything compiles: a call's kernels after its first miss are not reached, so the list is a lower bound)."""
    from validation.warmcache import hooks, replay

    start = time.perf_counter()
    target = hooks.Target.parse(req.target)
    os.environ["TRITON_CACHE_DIR"] = str(req.cache)
    with hooks.stand_in(target), hooks.reading_only():
        replay.open_aiter(req.aiter_pkg, req.arch)
        calls = sorted({c for p in make_plans(req) for c in p.calls})
        done = replay.replay(calls, req.arch, target, keep_kernels=True)
        makers, why_no_stubs = hooks.stub_makers(target)
        stubs = "not checked: " + why_no_stubs if makers is None else _stubs_from_cache(makers, done.kernels)
    missed = sorted(f"{name} ({key[:12]})" for key, name in done.missed.items())
    return {"arch": req.arch, "target": str(target), "triton": triton_version(), "triton_build": triton_build(),
            "launcher_key": launcher_key(), "models": list(req.models),
            "tp": list(req.tp), "calls": len(calls), "kernels": len({e.hash for e in done.events}) + len(missed),
            "hits": len({e.hash for e in done.events}), "compiled_at_first_use": missed, "failures": done.failures,
            "launch_path": stubs, "warmed": _warmed_for(warmed), "env": hooks.cache_invalidating_env(),
            "seconds": round(time.perf_counter() - start, 2)}


def _stubs_from_cache(makers, kernels) -> str:
    from validation.warmcache import hooks

    with hooks.no_compiler():
        made, error = hooks.make_stubs(makers, [hooks.compiled(k) for k in kernels])
    return f"FAILED: {error}" if error else f"{made} launchers and the driver module from the cache, no compiler"


def _warmed_for(warmed: dict[str, Any] | None) -> dict[str, Any] | None:
    if warmed is None:
        return None
    return {k: warmed.get(k) for k in ("arch", "target", "triton", "triton_build", "launcher_key", "env", "models", "tp",
                                       "ck_mode")}


def mismatch(warmed: dict[str, Any] | None, result: dict[str, Any]) -> list[str]:
    """Why a cache cannot serve this run, from the manifest alone: another arch, target, Triton or environment, or
    (its launchers) another platform key. A manifest written before a key was recorded is not held to it."""
    if warmed is None:
        return ["this image has no Triton cache manifest (built without the warm step)"]
    out = []
    for key in ("arch", "target", "triton", "triton_build", "env", "launcher_key"):
        if key in warmed and warmed.get(key) != result.get(key):
            out.append(f"the cache was warmed for {key} {warmed.get(key)!r}, this run is {result.get(key)!r}"
                       + (" (Triton reads the linkage from `file`: is it on PATH in one and not the other?)"
                          if key == "launcher_key" else ""))
    return out
