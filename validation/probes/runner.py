"""Run every probe against one context and assemble the report the host reads (schema 1)."""

from __future__ import annotations

import platform
import sys
import time

from validation.probes import (
    SCHEMA,
    arch_env,
    code,
    coverage,
    first_use,
    gpu_payload,
    hygiene,
    leftovers,
    prebuilt,
    pyenv,
    serving,
    versions,
)
from validation.probes.image import PRESENT, UNKNOWN, Finding, Image

# Table order: what decides correctness first, hygiene last.
PROBES = (
    arch_env.gpu_archs,
    arch_env.fp8_dtype,
    code.tuned_gemm_default,
    code.asm_gemm_gfx950,
    code.jit_core,
    prebuilt.ck_free,
    serving.route,
    prebuilt.prebuilt_kernels,
    gpu_payload.payload,
    first_use.first_use_compile,
    coverage.tuned_csv_coverage,
    hygiene.pip_check,
    hygiene.duplicate_distributions,
    hygiene.nvidia_packages,
    leftovers.installer_caches,
    prebuilt.toolchain,
    leftovers.secrets,
)


def run_probe(probe, ctx: Image) -> Finding | None:
    """A probe that breaks says unknown, with why; it never takes the others down."""
    try:
        return probe(ctx)
    except Exception as exc:  # noqa: BLE001 - any failure of one probe is that probe's unknown
        name = probe.__name__.replace("_", "-")
        return Finding(name, name, UNKNOWN, [f"probe failed: {type(exc).__name__}: {exc}"[:300]])


def audit(ctx: Image) -> dict:
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


def _where(ctx: Image, name: str) -> dict | None:
    found = pyenv.locate(ctx, name)
    if found is None:
        return None
    return {"path": ctx.shown(found.path), "how": found.how, "dist": found.dist.label if found.dist else None}


def image_context(arch: str, model: str | None, tp: tuple[int, ...], untuned_csv) -> Image:
    """The context of the image this process runs in: its environment, its Python, the real root."""
    import os

    probe = Image(arch=None)
    versions_json = probe.read_json("/opt/atom-build/versions.json")
    target, source = arch_env.infer_arch(arch, os.environ, versions_json)
    return Image(arch=target, arch_source=source, python=sys.executable, meta_path=True, model=model, tp=tp,
                   untuned_csv=untuned_csv)
