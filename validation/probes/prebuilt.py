"""aiter's compiled kernels: which prebuilt modules the image carries, whether they are CK, and who could JIT.

A prebuilt module is a `*.so` in aiter's JIT folders (aiter/jit, $AITER_JIT_DIR, ~/.aiter/jit); the archs it serves
are the entries of the offload bundles in its `.hip_fatbin`, read from their bytes (validation.gpucode). A module
without an entry for the image's arch is one aiter JITs (or fails to load) at first use. CK modules are the ones
aiter itself excludes from CK-free builds (its optCompilerConfig.json patterns plus the list in jit/core.py).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from validation.core.archs import CK_MODE_ENV, ck_mode_from_env
from validation.gpucode.elf import Malformed
from validation.gpucode.read import read
from validation.probes import code, pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image

CK_PATTERNS = ("CK_DIR", "py_itfs_ck", "gen_instances", "generate.py")
V3_FLAGS = ("FAV3_ON", "ONLY_FAV3")
COMPILERS = ("hipcc", "amdclang++", "amdclang", "clang++", "clang", "g++", "gcc", "c++", "cc")


def jit_dirs(ctx: Image, aiter: Path) -> list[Path]:
    dirs = [aiter / "jit"]
    if ctx.env.get("AITER_JIT_DIR"):
        dirs.append(ctx.path(ctx.env["AITER_JIT_DIR"]))
    dirs += [home / ".aiter" / "jit" for home in ctx.homes()]
    return [d for d in dirs if d.is_dir()]


def module_archs(file: Path) -> set[str] | str:
    """The archs whose code a module carries, from its bundles' entries; a one-line reason when it cannot be read."""
    try:
        return {p.arch for p in read(file, file.stat().st_size)}
    except (Malformed, OSError) as exc:
        return f"unreadable: {exc}"


def prebuilt_modules(ctx: Image, aiter: Path) -> dict[str, set[str] | str]:
    """shown path of each *.so in aiter's JIT folders -> the archs of its code objects (or why it is unreadable)."""
    key = f"so:{aiter}"
    if key not in ctx.cache:
        ctx.cache[key] = {ctx.shown(so): module_archs(so) for d in jit_dirs(ctx, aiter) for so in sorted(d.glob("*.so"))}
    return ctx.cache[key]


def ck_module_names(aiter: Path) -> set[str]:
    """The modules aiter's own _get_ck_exclude_modules() treats as CK."""
    names: set[str] = set()
    try:
        config = json.loads((aiter / "jit" / "optCompilerConfig.json").read_text())
    except (OSError, ValueError):
        config = {}
    for name, conf in config.items():
        text = json.dumps(conf)
        flags = json.dumps(conf.get("flags_extra_cc", [])) if isinstance(conf, dict) else ""
        if any(p in text for p in CK_PATTERNS) and not any(f in flags for f in V3_FLAGS):
            names.add(name)
    try:
        tree = ast.parse((aiter / "jit" / "core.py").read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_ck_exclude_modules":
            names |= {e.value for s in ast.walk(node) if isinstance(s, ast.Set)
                      for e in s.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return names


def ck_sources(ctx: Image, aiter: Path) -> list[str]:
    """CK source trees aiter's JIT would use: $CK_DIR, aiter_meta/3rdparty or a checkout's 3rdparty."""
    candidates = [ctx.path(ctx.env["CK_DIR"])] if ctx.env.get("CK_DIR") else []
    candidates += [aiter.parent / "aiter_meta" / "3rdparty" / "composable_kernel",
                   aiter.parent / "3rdparty" / "composable_kernel"]
    return [ctx.shown(c) for c in candidates if (c / "include").is_dir()]


def executables(ctx: Image, names: tuple[str, ...]) -> dict[str, str]:
    """name -> in-image path of the first executable found on PATH, /opt/rocm/bin or /opt/rocm/llvm/bin."""
    dirs = [d for d in ctx.env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":") if d]
    dirs += ["/opt/rocm/bin", "/opt/rocm/llvm/bin"]
    found: dict[str, str] = {}
    for name in names:
        for d in dirs:
            candidate = ctx.path(d) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found[name] = f"{d.rstrip('/')}/{name}"
                break
    return found


def rocm_version(ctx: Image) -> str | None:
    info = ctx.path("/opt/rocm/.info/version")
    try:
        return info.read_text().strip() or None
    except OSError:
        return None


def prebuilt_kernels(ctx: Image) -> Finding:
    f = Finding("prebuilt-kernels", "aiter carries prebuilt kernels for the arch (no JIT at first use)", UNKNOWN,
                fix="build the aiter wheel with PREBUILD_KERNELS=1 for the target arch (invoke wheels --arch X)")
    aiter = pyenv.aiter(ctx, f.evidence)
    if aiter is None:
        return f
    modules = prebuilt_modules(ctx, aiter.path)
    if modules:
        return _with_modules(ctx, f, modules)
    return _without_modules(ctx, f, aiter.path)


def _with_modules(ctx: Image, f: Finding, modules: dict[str, set[str] | str]) -> Finding:
    readable = {p: a for p, a in modules.items() if isinstance(a, set)}
    bad = {p: why for p, why in modules.items() if isinstance(why, str)}
    archs = sorted(set().union(*readable.values())) if readable else []
    f.evidence += [f"{p}: {why}" for p, why in list(bad.items())[:3]]
    if ctx.arch is None:
        f.evidence.insert(0, f"{len(modules)} prebuilt modules with code for {', '.join(archs) or 'no arch'}; "
                             f"target arch unknown ({ctx.arch_source})")
        return f
    mine = sorted(p for p, a in readable.items() if ctx.arch in a)
    jit = sorted(p for p in modules if p not in mine)
    f.status = PRESENT if jit else OK
    line = f"{len(mine)} of {len(modules)} prebuilt modules carry {ctx.arch} code objects"
    if jit:
        line += (f"; {len(jit)} would JIT at first use: {', '.join(Path(p).name for p in jit[:5])}"
                 + (f" (they hold {', '.join(archs)})" if archs else ""))
    f.evidence.insert(0, line + (f", e.g. {mine[0]}" if mine and not jit else ""))
    return f


def _without_modules(ctx: Image, f: Finding, aiter: Path) -> Finding:
    tools = executables(ctx, ("hipcc",))
    manifest = ctx.read_json("/opt/atom-build/manifest.json") or {}
    f.evidence.append(f"every aiter C++ kernel JITs at first use: no prebuilt *.so in {ctx.shown(aiter / 'jit')}")
    if manifest.get("prebuild_kernels"):
        f.status = PRESENT
        f.evidence.append("/opt/atom-build/manifest.json says prebuild_kernels=true: the wheel lost them")
    elif tools:
        f.status = PRESENT
        f.evidence.append(f"hipcc at {tools['hipcc']} will build them (minutes per module, at run time)")
    elif rocm_version(ctx) or ctx.path("/opt/rocm").is_dir():
        f.status = PRESENT
        f.evidence.append("and no hipcc in the image to build them: the first aiter C++ op fails")
    else:
        f.evidence.append("no ROCm in this image (/opt/rocm absent): aiter's kernels can neither load nor JIT here")
    return f


def ck_free(ctx: Image) -> Finding:
    f = Finding("ck-free", "CK-free settings agree (ENABLE_CK, ATOM_CK_FREE, aiter's CK, ATOM's Triton GEMM)", OK,
                fix="CK-free: ENABLE_CK=0 and ATOM_CK_FREE=1 with patch atom-ck-free-triton-gemm; full CK: an aiter with CK kernels or sources")
    env = {k: ctx.env[k] for k in ("ENABLE_CK", "ATOM_CK_FREE", CK_MODE_ENV, "ATOM_USE_TRITON_GEMM") if k in ctx.env}
    recorded = (ctx.read_json("/opt/atom-build/versions.json") or {}).get("ck_mode")
    f.evidence.append("env: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "ENABLE_CK and ATOM_CK_FREE unset")
                      + (f"; versions.json ck_mode={recorded}" if recorded else ""))
    try:
        mode = ck_mode_from_env(ctx.env) or recorded
    except ValueError as exc:
        f.status = PRESENT
        f.evidence.insert(0, f"contradictory CK settings: {exc}")
        return f
    aiter = pyenv.aiter(ctx, f.evidence)
    if aiter is None:
        f.status = UNKNOWN
        return f
    ck_built = sorted(p for p in prebuilt_modules(ctx, aiter.path) if Path(p).stem in ck_module_names(aiter.path))
    sources = ck_sources(ctx, aiter.path)
    f.evidence.append(f"aiter CK: {len(ck_built)} prebuilt CK modules, CK sources: {', '.join(sources) or 'none'}")
    free = mode == "ckfree" or env.get("ENABLE_CK") == "0"
    return _ck_free_verdict(ctx, f, free, env, bool(ck_built or sources))


def _ck_free_verdict(ctx: Image, f: Finding, free: bool, env: dict, has_ck: bool) -> Finding:
    """The verdict goes first in the evidence: it is what the one-screen table shows."""
    if not free:
        if not has_ck:
            f.status = PRESENT
            f.evidence.insert(0, "CK is on (ENABLE_CK unset or 1, ATOM_CK_FREE unset) but aiter has no CK kernels "
                                 "or sources: the first CK op fails (or tries to clone CK at run time)")
        return f
    if env.get("ATOM_CK_FREE") != "1":
        f.status = PRESENT
        f.evidence.insert(0, "aiter is CK-free but ATOM_CK_FREE is not 1: ATOM's linear layers still call CK GEMMs")
        return f
    honours, line = code.atom_honours_ck_free(ctx)
    f.evidence.append(line)
    if honours is False:
        f.status = PRESENT
        f.evidence.insert(0, "ATOM_CK_FREE=1 but use_triton_gemm() ignores it")
    elif honours is None:
        f.status = UNKNOWN
    return f


def toolchain(ctx: Image) -> Finding:
    """Information, never a failure by itself: Triton builds its launcher with a C compiler, aiter JITs with hipcc."""
    found = executables(ctx, (*COMPILERS, "git"))
    f = Finding("toolchain", "compilers and git in the image (information)", OK,
                fix="a runtime image needs a C compiler for Triton's launcher and hipcc only for aiter JIT; git for nothing")
    compilers = {k: v for k, v in found.items() if k != "git"}
    f.evidence.append("compilers: " + (", ".join(compilers.values()) or "none"))
    f.evidence.append(f"git: {found.get('git', 'none')}")
    return f
