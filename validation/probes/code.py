"""Pitfalls in aiter's and ATOM's code, read with the patches package's own checks (read-only).

A patch that would change a file means its pitfall is PRESENT; already-applied or upstream-fixed is ok;
a missing target or drifted code is unknown, with the reason. Nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from validation.probes import pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image

TUNED_GEMM = "tuned-gemm-hipblaslt"
NO_ASM = "no-asm-gemm-gfx950"
UNTUNED = (4099, 4097, 4096)  # M, N, K no tuned CSV holds: aiter's default decides
JIT_CORE = "jit-core-runtime-error"
CK_FREE = "atom-ck-free-triton-gemm"
VERDICT = {"applied": "patch would apply", "already-applied": "patched", "upstream-fixed": "fixed upstream",
           "not-present": "not found", "drifted": "code drifted"}
STATUS_OF = {"applied": PRESENT, "already-applied": OK, "upstream-fixed": OK, "not-present": UNKNOWN,
             "drifted": UNKNOWN}


def patch_checks(ctx: Image) -> dict[str, dict]:
    """name -> {"outcome", "detail", "file"} for every patch, each checked against its package's folder."""
    if "patches" in ctx.cache:
        return ctx.cache["patches"]
    try:
        from patches import engine
        from patches.catalog import PATCHES
    except ImportError as exc:
        ctx.cache["patches"] = {"": {"outcome": "unavailable", "detail": f"patches package not importable ({exc})"}}
        return ctx.cache["patches"]
    results: dict[str, dict] = {}
    groups: dict[Path, list] = {}
    for patch in PATCHES:
        package = patch.target.split("/", 1)[0]
        where = pyenv.locate(ctx, package)
        if where is None:
            results[patch.name] = {"outcome": "not-present", "detail": f"{package} not found in this image's Python"}
            continue
        groups.setdefault(where.root, []).append(patch)
    for root, patches in groups.items():
        for r in engine.run(root, patches, "check").results:
            results[r.name] = {"outcome": r.outcome, "detail": r.detail, "file": ctx.shown(root / r.target)}
    ctx.cache["patches"] = results
    return results


def _from_patch(ctx: Image, name: str, finding: Finding) -> Finding:
    checks = patch_checks(ctx)
    result = checks.get(name) or checks.get("") or {"outcome": "not-present", "detail": "not checked"}
    outcome = result["outcome"]
    finding.status = STATUS_OF.get(outcome, UNKNOWN)
    where = f"{result['file']}; " if result.get("file") else ""
    finding.evidence.append(f"{VERDICT.get(outcome, outcome)}: {result['detail']} ({where}patch {name})")
    return finding


def tuned_gemm_default(ctx: Image) -> Finding:
    f = Finding("tuned-gemm-default", "untuned GEMM shapes fall back to hipBLASLt, not torch", OK,
                fix="apply patch tuned-gemm-hipblaslt (invoke patch --image IMAGE), or rebuild with invoke build-clean")
    _from_patch(ctx, TUNED_GEMM, f)
    aiter = pyenv.locate(ctx, "aiter")
    if aiter is not None:
        _dispatched(ctx, f, aiter.path)
    return f


def _dispatched(ctx: Image, f: Finding, aiter_pkg: Path) -> None:
    """"ok" needs the dispatcher ATOM calls (tgemm.mm) to reach hipBLASLt for an untuned shape, executed here
    with aiter's runtime stubbed (validation.aiterpkg.gemm_dispatch): a patched lookup whose dispatcher reroutes is PRESENT."""
    try:
        from validation.aiterpkg.gemm_dispatch import Call, trace_source
        from validation.core.archs import ARCHS
    except ImportError as exc:  # an image without torch
        f.evidence.append(f"dispatcher not executed: {exc}")
        f.status = UNKNOWN if f.status == OK else f.status
        return
    call = Call(*UNTUNED)
    for arch in [ctx.arch] if ctx.arch else sorted(ARCHS):
        try:
            trace = trace_source(aiter_pkg, arch, ARCHS[arch].default_cu_num, call)
        except Exception as exc:  # noqa: BLE001 - aiter's code failing to run is the evidence
            f.evidence.append(f"dispatcher not executed on {arch}: {type(exc).__name__}: {exc}")
            f.status = UNKNOWN if f.status == OK else f.status
            continue
        f.evidence.append(f"tgemm.mm (ATOM's linear entry) for untuned {call.label} on {arch} reached "
                          f"{trace.says()} (executed, aiter's runtime stubbed)")
        if trace.backends() != ["hipblaslt"]:
            f.status = PRESENT


def asm_gemm_gfx950(ctx: Image) -> Finding:
    f = Finding("asm-gemm-gfx950", "ASM GEMM cannot be selected on gfx950", OK,
                fix="apply patch no-asm-gemm-gfx950 (ASM a16w16 GEMM is not validated on gfx950)")
    if ctx.arch == "gfx942":
        f.evidence.append(f"not applicable: the target is gfx942 ({ctx.arch_source}); the patch only acts on gfx950")
        return f
    _from_patch(ctx, NO_ASM, f)
    if ctx.arch is None and f.status == PRESENT:
        f.status = UNKNOWN
        f.evidence.append(f"target arch unknown ({ctx.arch_source}): present only if this image runs on gfx950")
    return f


def jit_core(ctx: Image) -> Finding:
    f = Finding("jit-systemexit", "a failed aiter JIT build raises RuntimeError, not SystemExit", OK,
                fix="apply patch jit-core-runtime-error (SystemExit bypasses `except Exception` fallbacks)")
    return _from_patch(ctx, JIT_CORE, f)


def atom_honours_ck_free(ctx: Image) -> tuple[bool | None, str]:
    """Whether ATOM's use_triton_gemm() reads ATOM_CK_FREE (None: cannot tell), with the evidence line."""
    probe = _from_patch(ctx, CK_FREE, Finding("", "", OK))
    honours = {OK: True, PRESENT: False}.get(probe.status)
    return honours, probe.evidence[0]
