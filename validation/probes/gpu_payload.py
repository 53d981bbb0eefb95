"""The `payload` finding: the GPU code the image carries, read from its bytes (validation.gpucode), judged for the
image's arch: another arch's code where aiter's loader picks by arch, a folder of one arch holding another's, or
a family with code for other archs and none for this one."""

from __future__ import annotations

from pathlib import Path

from validation.gpucode import judge
from validation.gpucode.scan import manifest, scan
from validation.probes import prebuilt, pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image

ROCM = "/opt/rocm"


def roots(ctx: Image) -> list[Path]:
    """Where an image keeps GPU code: every site-packages on its Python's path, aiter's JIT folders, ROCm."""
    found = [Path(p) for p in ctx.sys_path if p and Path(p).name in ("site-packages", "dist-packages")]
    aiter = pyenv.locate(ctx, "aiter")
    if aiter is not None:
        found += [d for d in prebuilt.jit_dirs(ctx, aiter.path) if not any(_under(d, r) for r in found)]
    rocm = ctx.path(ROCM)
    if rocm.exists():
        found.append(rocm.resolve() if rocm.is_symlink() else rocm)
    if ctx.env.get("TRITON_CACHE_DIR"):
        found.append(ctx.path(ctx.env["TRITON_CACHE_DIR"]))
    return [r for r in dict.fromkeys(found) if r.is_dir()]


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def payload(ctx: Image) -> Finding:
    f = Finding("payload", "the image's GPU code is for its arch (read from the code objects' bytes)", UNKNOWN,
                fix="rebuild with build-clean for one arch: the clean step keeps only that arch's aiter_meta/hsa/")
    where = roots(ctx)
    result = scan(where, root=ctx.root)
    m = manifest(result, target=ctx.arch, roots=[ctx.shown(r) for r in where])
    ctx.cache["payload"] = m
    if ctx.arch is None:
        f.evidence.append(f"target arch unknown ({ctx.arch_source}); code by arch: "
                          + ", ".join(f"{a} {judge.mib(r['bytes'])}" for a, r in m["archs"].items()))
        return f
    verdicts = judge.judge(m, ctx.arch, judge.AITER_NEEDS if pyenv.locate(ctx, "aiter") is not None else ())
    f.status = PRESENT if judge.status(verdicts) == judge.PRESENT else OK
    f.evidence += [v.line for v in sorted(verdicts, key=lambda v: v.status != judge.PRESENT)]
    f.evidence.append(f"{result.files_read} files read under {', '.join(m['roots'])} in {result.seconds} s")
    return f
