"""Triton GEMM configs against the arch's LDS per CU, and our estimator against the compiler."""

from __future__ import annotations

import json

import torch

from validation.aiterpkg.config_lds import (
    aiter_config_files,
    configs_in,
    dtype_bytes,
    estimate,
    load_json,
)
from validation.checks.context import Context
from validation.checks.report import Case, CheckResult
from validation.core.device import interpreting

NAME = "lds-budget"
MAX_EST_ERROR = 0.5  # beyond this the estimator says nothing useful about a config


def run(ctx: Context) -> CheckResult:
    if ctx.aiter_root is not None:
        cases, metrics = _aiter_configs(ctx)
    else:
        cases, metrics = _own_configs(ctx)
    cases += _compiler_cases(ctx, metrics)
    return CheckResult.from_cases(NAME, cases, metrics)


def _aiter_configs(ctx: Context):
    files, pattern = aiter_config_files(ctx.aiter_root, ctx.arch.aiter_config_prefix,
                                        ctx.arch.aiter_legacy_config_prefix)
    budget = ctx.arch.lds_bytes
    metrics = {"source": f"aiter configs {pattern}", "lds_bytes": budget,
               "files": len(files), "configs": 0, "max_estimate": 0, "over_budget": []}
    if not files:
        return [Case.verdict("aiter-configs", False, "aiter", f"no {pattern} under "
                             f"{ctx.aiter_root}/ops/triton/configs")], metrics
    cases = []
    for f in files:
        cases.append(_file_case(f, budget, metrics))
    return cases, metrics


def _file_case(f, budget: int, metrics: dict) -> Case:
    sizes = dtype_bytes(f.name)
    if sizes is None:
        return Case.skipped(f.name, "estimate", "no A<x>W<y> dtype token in the file name")
    try:
        found = list(configs_in(load_json(f)))
    except (OSError, json.JSONDecodeError) as e:
        return Case.verdict(f.name, False, "estimate", f"unreadable: {e}")
    if not found:
        return Case.skipped(f.name, "estimate", "no BLOCK_SIZE_M/N/K configs in file")
    worst, over = 0, []
    for key, c in found:
        est = estimate(c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"], *sizes, c.get("num_stages", 2), "amd")
        worst = max(worst, est)
        if est > budget:
            over.append(f"{key}={est // 1024}KiB")
    metrics["configs"] += len(found)
    metrics["max_estimate"] = max(metrics["max_estimate"], worst)
    metrics["over_budget"] += [f"{f.name}:{o}" for o in over]
    note = f"{len(found)} configs, max {worst / 1024:.0f} KiB of {budget // 1024} KiB"
    return Case.verdict(f.name, not over, "estimate", note + (f"; over: {', '.join(over)}" if over else ""))


def _own_configs(ctx: Context):
    from validation.kernels.triton_gemm import CPU_CONFIG, GPU_CONFIG

    budget = ctx.arch.lds_bytes
    metrics = {"source": "our own kernels' configs (aiter not installed, no --aiter-src)", "lds_bytes": budget}
    cases = []
    for name, cfg in (("cpu", CPU_CONFIG), ("gpu", GPU_CONFIG)):
        for dt, nbytes in (("bf16", 2), ("fp8", 1)):
            est = estimate(cfg.block_m, cfg.block_n, cfg.block_k, nbytes, nbytes, cfg.num_stages, "amd")
            cases.append(Case.verdict(f"own-{name}-{dt}", est <= budget, "estimate",
                                      f"{est / 1024:.1f} KiB of {budget // 1024} KiB (aiter not installed: own configs)"))
    return cases, metrics


def _compiler_cases(ctx: Context, metrics: dict) -> list[Case]:
    if not ctx.on_gpu or interpreting():
        return [Case.skipped("estimate-vs-compiler", "triton", "no GPU: the interpreter compiles nothing")]
    from validation.kernels.triton_gemm import GemmConfig, scaled_gemm

    vendor = ctx.info.vendor
    dev = ctx.info.torch_device
    rows, cases = [], []
    fp8_ok = ctx.info.is_amd or (ctx.info.capability or (0, 0)) >= (8, 9)
    fp8 = getattr(torch, ctx.arch.fp8_dtype if ctx.info.is_amd else "float8_e4m3fn")
    for dt, nbytes in (("bf16", 2), ("fp8", 1)):
        if dt == "fp8" and not fp8_ok:
            continue
        for cfg in (GemmConfig(64, 64, 64, 4, 3), GemmConfig(128, 128, 64, 8, 2), GemmConfig(128, 64, 128, 4, 3),
                    GemmConfig(64, 128, 32, 4, 4), GemmConfig(64, 64, 64, 4, 1)):
            a = torch.zeros(256, 512, device=dev).to(torch.bfloat16 if dt == "bf16" else fp8)
            w = torch.zeros(256, 512, device=dev).to(a.dtype)
            _, handle = scaled_gemm(a, w, cfg=cfg)
            shared = int(handle.metadata.shared)
            est = estimate(cfg.block_m, cfg.block_n, cfg.block_k, nbytes, nbytes, cfg.num_stages, vendor)
            err = (est - shared) / shared if shared else float("inf")
            label = f"{dt} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} s{cfg.num_stages} w{cfg.num_warps}"
            rows.append({"config": label, "estimate": est, "compiler_shared": shared,
                         "n_regs": int(getattr(handle, "n_regs", -1) or -1), "rel_error": round(err, 4)})
            cases.append(Case.verdict(f"estimate-vs-compiler {label}", abs(err) <= MAX_EST_ERROR, f"triton({vendor})",
                                      f"estimate {est} B, compiler {shared} B, error {err:+.1%}, "
                                      f"n_regs {rows[-1]['n_regs']}"))
    metrics["compiler"] = rows
    if rows:
        errs = [abs(r["rel_error"]) for r in rows]
        metrics["estimator_abs_rel_error"] = {"mean": round(sum(errs) / len(errs), 4), "max": max(errs)}
    return cases
