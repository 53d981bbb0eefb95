"""The arch the image was built for vs the device, GPU_ARCHS, aiter's get_gfx() and dtypes.fp8."""

from __future__ import annotations

import os

import torch

from validation.aiterpkg.locate import try_import
from validation.checks import fp8
from validation.checks.context import Context
from validation.checks.report import Case, CheckResult
from validation.core.device import fp8_native

NAME = "arch-consistency"


def run(ctx: Context) -> CheckResult:
    cases = [_device(ctx), _gpu_archs(ctx), *_aiter(ctx), _fp8_dtype(ctx)]
    return CheckResult.from_cases(NAME, cases, {"target": ctx.arch.name, "device_arch": ctx.info.gcn_arch,
                                                "GPU_ARCHS": os.environ.get("GPU_ARCHS")})


def _device(ctx: Context) -> Case:
    if not ctx.info.is_amd:
        return Case.skipped("device-arch", "gcnArchName", f"device is {ctx.info.name}, not an AMD GPU: no gcnArchName")
    ok = ctx.info.gcn_arch == ctx.arch.name
    return Case.verdict("device-arch", ok, "gcnArchName", f"device {ctx.info.gcn_arch}, --arch {ctx.arch.name}")


def _gpu_archs(ctx: Context) -> Case:
    raw = os.environ.get("GPU_ARCHS")
    if raw is None or raw.strip() in ("", "native"):
        return Case.skipped("GPU_ARCHS", "env", "GPU_ARCHS unset/native: aiter detects the device itself")
    entries = [e.strip() for e in raw.split(";") if e.strip()]
    if len(entries) != 1:
        # aiter's chip_info takes split(";")[-1]: a multi-arch image silently runs the last arch everywhere.
        return Case.verdict("GPU_ARCHS", False, "env", f"GPU_ARCHS={raw!r} has {len(entries)} entries; aiter "
                            f"takes the LAST ({entries[-1] if entries else 'none'}), expected exactly {ctx.arch.name}")
    return Case.verdict("GPU_ARCHS", entries[0] == ctx.arch.name, "env", f"GPU_ARCHS={raw!r}, --arch {ctx.arch.name}")


def _aiter(ctx: Context) -> list[Case]:
    if not ctx.aiter_installed:
        why = "aiter not installed"
        return [Case.skipped("aiter.get_gfx", "aiter", why), Case.skipped("aiter.dtypes.fp8", "aiter", why)]
    chip, err = try_import("aiter.jit.utils.chip_info")
    if chip is None and not ctx.info.is_amd:
        # aiter reads the ROCm install at import time; off an AMD host that is an environment fact, not a defect.
        why = f"aiter cannot import without ROCm on this {ctx.info.vendor} device ({err})"
        return [Case.skipped("aiter.get_gfx", "aiter", why), Case.skipped("aiter.dtypes.fp8", "aiter", why)]
    if chip is None:
        gfx_case = Case.verdict("aiter.get_gfx", False, "aiter", err)
    else:
        try:
            gfx = chip.get_gfx()
            gfx_case = Case.verdict("aiter.get_gfx", gfx == ctx.arch.name, "aiter",
                                    f"get_gfx() = {gfx}, --arch {ctx.arch.name}")
        except (Exception, SystemExit) as e:  # noqa: BLE001 - aiter probes the device and may exit
            gfx_case = Case.verdict("aiter.get_gfx", False, "aiter", f"get_gfx() raised {type(e).__name__}: {e}")
    dtypes, err = try_import("aiter.utility.dtypes")
    if dtypes is None:
        return [gfx_case, Case.verdict("aiter.dtypes.fp8", False, "aiter", err)]
    want = fp8.fp8_dtype(ctx.arch.fp8_dtype)
    return [gfx_case, Case.verdict("aiter.dtypes.fp8", dtypes.fp8 == want, "aiter",
                                   f"dtypes.fp8 = {dtypes.fp8}, {ctx.arch.name} needs {want}")]


def _fp8_dtype(ctx: Context) -> Case:
    """The arch's fp8 type exists in this torch, has the max we scale to, and round-trips here."""
    name = ctx.arch.fp8_dtype
    dtype = getattr(torch, name, None)
    if dtype is None:
        return Case.verdict("fp8-dtype", False, "torch", f"torch {torch.__version__} has no {name}")
    fmax = torch.finfo(dtype).max
    x = torch.linspace(-3, 3, 257, device=ctx.info.torch_device)
    q, s = fp8.quantise(x, dtype, ctx.arch.fp8_max)
    rel = float(((fp8.dequantise(q, s) - x).abs().max() / x.abs().max()).cpu())
    native, why = fp8_native(name, ctx.info)
    ok = fmax == ctx.arch.fp8_max and rel < 2**-3  # e4m3: 3 mantissa bits
    note = (f"{name} finfo.max {fmax:g} (arch needs {ctx.arch.fp8_max:g}), round-trip rel err {rel:.3g}; "
            + ("native here" if native else f"emulated in torch here: {why}"))
    return Case.verdict("fp8-dtype", ok, "torch", note)
