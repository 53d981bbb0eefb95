"""python -m validation: parse, plan the context, run the checks, print a table, write JSON, exit 0/1/2.

Arguments are parsed and checked before torch or any kernel module is imported: `--help` and usage errors are
answered on a host without torch, and nothing is written (no --json-file folder) before every argument is valid.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from validation.core.archs import CK_FREE_ENV, CK_MODE_ENV, CK_MODES, ck_mode_from_env
from validation.core.usage import USAGE_ERROR, Parser, UsageError

# validation.checks.CHECKS in run order; named here so that parsing imports no check (they import torch).
CHECK_NAMES = ("arch-consistency", "gemm-hipblaslt", "gemm-triton", "moe-triton", "atom-reroutes", "gemm-ck",
               "gemm-asm", "lds-budget", "tuned-csv-coverage", "payload", "first-use-compile", "route")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value:g} is not a share between 0 and 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    from validation.aiterpkg.tuned_csv import COVERAGE_WARN_BELOW
    from validation.core.models import PRESETS

    p = Parser(prog="python -m validation", description="Backend validation kernels, arch and config checks.")
    p.add_argument("--arch", required=True, choices=["gfx942", "gfx950", "auto"], help="target arch of the image")
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when torch sees a GPU, else cpu")
    p.add_argument("--only", nargs="+", metavar="CHECK", choices=CHECK_NAMES, help="run only these checks")
    p.add_argument("--model", default="llama3-8b", help=f"config.json path or preset ({', '.join(PRESETS)})")
    p.add_argument("--tp", type=positive_int, nargs="+", default=[1, 8], metavar="N", help="tensor-parallel sizes")
    p.add_argument("--json-file", type=Path, metavar="PATH", help="write the JSON report here")
    p.add_argument("--write-untuned", type=Path, metavar="PATH", help="write missing shapes as aiter untuned CSV")
    p.add_argument("--cu-num", type=positive_int, help="CU count for tuned-CSV lookups (default: device, else arch's)")
    p.add_argument("--aiter-src", "--aiter-root", dest="aiter_src", metavar="DIR",
                   help="an aiter checkout (or its aiter/ package folder): its Triton kernels run through "
                        "validation.aiterpkg.adapter, its configs and CSVs are read; default: the installed aiter")
    p.add_argument("--ck-mode", choices=CK_MODES,
                   help="how aiter was built (default: ATOM_BUILD_CK_MODE / ATOM_CK_FREE, else detected from "
                        "aiter's prebuilt modules)")
    p.add_argument("--tuned-csv", action="append", metavar="PATH", help="tuned bf16 GEMM CSV (repeatable)")
    p.add_argument("--min-coverage", type=share, default=0.0, metavar="SHARE",
                   help=f"fail tuned-csv-coverage (exit 1) below this share (0..1); without it coverage below "
                        f"{COVERAGE_WARN_BELOW * 100:.0f}%% is a warning and the exit code stays 0")
    p.add_argument("--full-shapes", action=argparse.BooleanOptionalAction, default=None,
                   help="model-sized shapes (default on GPU); small ones for the CPU interpreter")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
    except UsageError as e:
        print(f"python -m validation: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except SystemExit as e:  # --help: argparse printed it
        return e.code if isinstance(e.code, int) else 0
    try:
        device = args.device or _default_device()
        if device == "cpu":
            # Must be set before any @triton.jit runs its decorator: our kernels then run on numpy.
            os.environ["TRITON_INTERPRET"] = "1"
        ctx = make_context(args, device)
    except UsageError as e:
        print(f"python -m validation: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    return run(ctx, args.only, args.json_file)


def parse(argv: list[str] | None):
    """Flags, and what can be told from them alone; imports nothing that needs torch."""
    from validation.core.models import load_config
    from validation.core.outputs import check_output

    args = build_parser().parse_args(argv)
    try:
        for flag, path in (("--json-file", args.json_file), ("--write-untuned", args.write_untuned)):
            if path is not None:
                check_output(path, flag)  # before any check runs (run() makes missing folders)
        load_config(args.model)
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    return args


def _default_device() -> str:
    from validation.core.device import cuda_available

    return "cuda" if cuda_available() else "cpu"


def make_context(args, device: str):
    from validation.aiterpkg import locate
    from validation.checks.context import Context
    from validation.core.archs import resolve
    from validation.core.device import detect
    try:
        info = detect(device)
        spec = resolve(args.arch, info.gcn_arch, info.name)
    except (RuntimeError, ValueError) as e:
        raise UsageError(str(e)) from e
    root = locate.aiter_root(args.aiter_src)
    if args.aiter_src and not (root / "configs").is_dir() and not (root / "ops").is_dir():
        raise UsageError(f"--aiter-src {args.aiter_src}: no aiter package (aiter/configs/, aiter/ops/) there")
    full = args.full_shapes if args.full_shapes is not None else info.kind == "cuda"
    ck_mode, ck_source, ck_error = _ck_mode(args.ck_mode)
    from_source = bool(args.aiter_src)
    return Context(arch=spec, info=info, aiter_root=root, aiter_installed=locate.installed(),
                   aiter_from_source=from_source, aiter_commit=locate.aiter_commit(root, from_source),
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

    from validation.aiterpkg.locate import aiter_version
    from validation.checks import CHECKS, run_check
    from validation.checks.report import Report, exit_code, render
    from validation.core.outputs import WRITE_FAILED, write_output

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
        failed = write_output(json_path, report.to_json() + "\n", "--json-file")
        if failed:
            print(f"python -m validation: error: {failed}", file=sys.stderr)
            return WRITE_FAILED
    return report.exit_code


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__
