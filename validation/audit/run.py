"""Run every probe against one context and assemble the report the host reads (schema 1)."""

from __future__ import annotations

import platform
import sys
import time

from validation.audit import (
    SCHEMA,
    arch_env,
    code,
    coverage,
    gpucode,
    hygiene,
    kernels,
    leftovers,
    pyenv,
    triton_cache,
    versions,
)
from validation.audit.context import PRESENT, UNKNOWN, Context, Finding

# Table order: what decides correctness first, hygiene last.
PROBES = (
    arch_env.gpu_archs,
    arch_env.fp8_dtype,
    code.tuned_gemm_default,
    code.asm_gemm_gfx950,
    code.jit_core,
    kernels.ck_free,
    kernels.prebuilt_kernels,
    gpucode.payload,
    triton_cache.first_use_compile,
    coverage.tuned_csv_coverage,
    hygiene.pip_check,
    hygiene.duplicate_distributions,
    hygiene.nvidia_packages,
    leftovers.installer_caches,
    kernels.toolchain,
    leftovers.secrets,
)


def run_probe(probe, ctx: Context) -> Finding | None:
    """A probe that breaks says unknown, with why; it never takes the others down."""
    try:
        return probe(ctx)
    except Exception as exc:  # noqa: BLE001 - any failure of one probe is that probe's unknown
        name = probe.__name__.replace("_", "-")
        return Finding(name, name, UNKNOWN, [f"probe failed: {type(exc).__name__}: {exc}"[:300]])


def audit(ctx: Context) -> dict:
    start = time.monotonic()
    findings = [f for f in (run_probe(p, ctx) for p in PROBES) if f is not None]
    return {
        "schema": SCHEMA,
        "image_arch": ctx.arch,
        "arch_source": ctx.arch_source,
        "python": {"executable": ctx.python, "version": platform.python_version(), "sys_path": ctx.sys_path},
        "packages": {name: _where(ctx, name) for name in ("aiter", "atom", "torch", "triton")},
        "findings": [f.to_json() for f in findings],
        "payload": ctx.cache.get("payload"),
        "versions": versions.versions(ctx),
        "present": sum(f.status == PRESENT for f in findings),
        "seconds": round(time.monotonic() - start, 2),
    }


def _where(ctx: Context, name: str) -> dict | None:
    found = pyenv.locate(ctx, name)
    if found is None:
        return None
    return {"path": ctx.shown(found.path), "how": found.how, "dist": found.dist.label if found.dist else None}


def image_context(arch: str, model: str | None, tp: tuple[int, ...], untuned_csv) -> Context:
    """The context of the image this process runs in: its environment, its Python, the real root."""
    import os

    probe = Context(arch=None)
    versions_json = probe.read_json("/opt/atom-build/versions.json")
    target, source = arch_env.infer_arch(arch, os.environ, versions_json)
    return Context(arch=target, arch_source=source, python=sys.executable, meta_path=True, model=model, tp=tp,
                   untuned_csv=untuned_csv)
