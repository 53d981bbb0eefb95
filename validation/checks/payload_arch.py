"""The image's GPU code for --arch, read from its bytes: the same manifest and verdicts as audit's `payload`."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from validation.checks.context import Context
from validation.checks.report import Case, CheckResult
from validation.gpucode import judge
from validation.gpucode.scan import manifest, scan

NAME = "payload"
ROCM = Path("/opt/rocm")


def roots(ctx: Context) -> list[Path]:
    """This Python's site-packages, aiter's own folder when it lives elsewhere (--aiter-src), ROCm and the image's
    Triton cache (TRITON_CACHE_DIR)."""
    found = [Path(sysconfig.get_paths()["purelib"])]
    if ctx.aiter_root is not None and not any(r in ctx.aiter_root.parents for r in found):
        found.append(ctx.aiter_root.parent)
    if ROCM.exists():
        found.append(ROCM.resolve())
    if os.environ.get("TRITON_CACHE_DIR"):
        found.append(Path(os.environ["TRITON_CACHE_DIR"]))
    return [r for r in dict.fromkeys(found) if r.is_dir()]


def run(ctx: Context) -> CheckResult:
    where = roots(ctx)
    result = scan(where, ours=(sys.prefix, os.environ.get("TRITON_CACHE_DIR") or sys.prefix))
    m = manifest(result, target=ctx.arch.name, roots=[str(r) for r in where])
    # An installed aiter loads its assembly kernels for the arch; a source tree (--aiter-src) ships none.
    needs = judge.AITER_NEEDS if ctx.aiter_root is not None and not ctx.aiter_from_source else ()
    cases = [Case.verdict(v.name, v.status != judge.PRESENT, "payload", v.line)
             for v in judge.judge(m, ctx.arch.name, needs)]
    metrics = {"archs": {a: {k: r[k] for k in ("files", "bytes", "named_only_files", "ours_bytes", "base_bytes")}
                         for a, r in m["archs"].items()},
               "families": m["families"], "unknown": m["unknown"][:20], "files_read": m["files_read"],
               "scan_seconds": result.seconds}
    return CheckResult.from_cases(NAME, cases, metrics)
