"""python -m validation: parse, plan the context, run the checks, print a table, write JSON, exit 0/1/2."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from validation.archs import CK_FREE_ENV, CK_MODE_ENV, CK_MODES, ck_mode_from_env

USAGE_ERROR = 2


class UsageError(Exception):
    """Bad flags or an impossible request: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    from validation.checks import CHECKS
    from validation.models import PRESETS

    p = _Parser(prog="python -m validation", description="Backend validation kernels, arch and config checks.")
    p.add_argument("--arch", required=True, choices=["gfx942", "gfx950", "auto"], help="target arch of the image")
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when torch sees a GPU, else cpu")
    p.add_argument("--only", nargs="+", metavar="CHECK", choices=list(CHECKS), help="run only these checks")
    p.add_argument("--model", default="llama3-8b", help=f"config.json path or preset ({', '.join(PRESETS)})")
    p.add_argument("--tp", type=int, nargs="+", default=[1, 8], metavar="N", help="tensor-parallel sizes")
    p.add_argument("--json", type=Path, metavar="PATH", help="write the JSON report here")
    p.add_argument("--write-untuned", type=Path, metavar="PATH", help="write missing shapes as aiter untuned CSV")
    p.add_argument("--cu-num", type=int, help="CU count for tuned-CSV lookups (default: device, else arch's)")
    p.add_argument("--aiter-src", "--aiter-root", dest="aiter_src", metavar="DIR",
                   help="an aiter checkout (or its aiter/ package folder): its Triton kernels run through "
                        "validation.aiter_adapter, its configs and CSVs are read; default: the installed aiter")
    p.add_argument("--ck-mode", choices=CK_MODES,
                   help="how aiter was built (default: ATOM_BUILD_CK_MODE / ATOM_CK_FREE, else detected from "
                        "aiter's prebuilt modules)")
    p.add_argument("--tuned-csv", action="append", metavar="PATH", help="tuned bf16 GEMM CSV (repeatable)")
    p.add_argument("--min-coverage", type=float, default=0.0, help="fail tuned-csv-coverage below this share")
    p.add_argument("--full-shapes", action=argparse.BooleanOptionalAction, default=None,
                   help="model-sized shapes (default on GPU); small ones for the CPU interpreter")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.json is not None:
            check_writable(args.json)
        device = args.device or _default_device()
        if device == "cpu":
            # Must be set before any @triton.jit runs its decorator: our kernels then run on numpy.
            os.environ["TRITON_INTERPRET"] = "1"
        ctx = make_context(args, device)
    except UsageError as e:
        print(f"python -m validation: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    return run(ctx, args.only, args.json)


def check_writable(path: Path) -> None:
    """--json must be writable before hours of checks run; a file created only to prove it is removed again."""
    if path.is_dir():
        raise UsageError(f"--json {path}: is a folder, not a file")
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a"):
            pass
    except OSError as e:
        raise UsageError(f"--json {path}: cannot write there ({e.strerror or e})") from None
    if not existed:
        path.unlink()


def _default_device() -> str:
    from validation.device import cuda_available

    return "cuda" if cuda_available() else "cpu"


def make_context(args, device: str):
    from validation import aiter_probe
    from validation.arch import resolve
    from validation.checks.context import Context
    from validation.device import detect
    from validation.models import load_config

    try:
        info = detect(device)
        spec = resolve(args.arch, info.gcn_arch, info.name)
        load_config(args.model)
    except (RuntimeError, ValueError) as e:
        raise UsageError(str(e)) from e
    if any(t < 1 for t in args.tp):
        raise UsageError("--tp sizes must be >= 1")
    root = aiter_probe.aiter_root(args.aiter_src)
    if args.aiter_src and not (root / "configs").is_dir() and not (root / "ops").is_dir():
        raise UsageError(f"--aiter-src {args.aiter_src}: no aiter package (aiter/configs/, aiter/ops/) there")
    full = args.full_shapes if args.full_shapes is not None else info.kind == "cuda"
    ck_mode, ck_source, ck_error = _ck_mode(args.ck_mode)
    from_source = bool(args.aiter_src)
    return Context(arch=spec, info=info, aiter_root=root, aiter_installed=aiter_probe.installed(),
                   aiter_from_source=from_source, aiter_commit=aiter_probe.aiter_commit(root, from_source),
                   model=args.model, tp=args.tp, cu_num=args.cu_num or (info.cu_num if info.is_amd else None),
                   tuned_csv=args.tuned_csv or [], write_untuned=args.write_untuned,
                   min_coverage=args.min_coverage, seed=args.seed, full_shapes=full,
                   ck_mode=ck_mode, ck_mode_source=ck_source, ck_mode_error=ck_error)


def _ck_mode(flag: str | None) -> tuple[str | None, str, str]:
    """(mode, who said so, error). A contradictory image environment is the image's error: gemm-ck fails on it."""
    if flag:
        return flag, "--ck-mode", ""
    try:
        mode = ck_mode_from_env(os.environ)
    except ValueError as e:
        return None, "", str(e)
    said = ", ".join(f"{k}={os.environ[k]}" for k in (CK_MODE_ENV, CK_FREE_ENV) if os.environ.get(k))
    return mode, said if mode else "", ""


def run(ctx, only: list[str] | None, json_path: Path | None) -> int:
    import torch

    from validation.aiter_probe import aiter_version
    from validation.checks import CHECKS, run_check
    from validation.report import Report, exit_code, render

    start = time.perf_counter()
    report = Report(arch=ctx.arch.name, device=ctx.info.kind, device_name=ctx.info.name, torch=torch.__version__,
                    triton=_triton_version(), aiter=aiter_version(), aiter_commit=ctx.aiter_commit,
                    aiter_source=str(ctx.aiter_root) if ctx.aiter_root else None)
    for name in only or list(CHECKS):
        report.checks.append(run_check(name, ctx))
        print(f"{name}: {report.checks[-1].status} ({report.checks[-1].wall_s:.1f} s)", file=sys.stderr)
    report.wall_s = round(time.perf_counter() - start, 3)
    report.exit_code = exit_code(report.checks)
    print(render(report))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(report.to_json() + "\n")
    return report.exit_code


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__
