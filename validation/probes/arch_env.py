"""Which arch the image serves: GPU_ARCHS / PYTORCH_ROCM_ARCH, and the fp8 dtype aiter will pick for it.

aiter reads GPU_ARCHS and, for a list such as "gfx942;gfx950", takes the LAST entry (chip_info.py), so an image
built for both silently runs gfx950 kernels and e4m3fn on a gfx942 host. Everything here is read statically.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from validation.core.archs import ARCHS
from validation.probes import pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image

ARCH_VARS = ("GPU_ARCHS", "PYTORCH_ROCM_ARCH")
CHIP_INFO = "jit/utils/chip_info.py"
DTYPES = "utility/dtypes.py"


def split_archs(value: str) -> list[str]:
    return [a for a in re.split(r"[;,\s]+", value.strip()) if a]


def infer_arch(asked: str | None, env, versions: dict | None) -> tuple[str | None, str]:
    """The arch to audit against, and where it came from; (None, why) when the image does not say."""
    if asked and asked != "auto":
        return asked, "--arch"
    for var in ARCH_VARS:
        archs = split_archs(env.get(var, ""))
        if len(archs) == 1 and archs[0] in ARCHS:
            return archs[0], f"{var}={env[var]}"
    if versions and versions.get("arch") in ARCHS:
        return versions["arch"], "/opt/atom-build/versions.json"
    return None, "no --arch, and neither GPU_ARCHS, PYTORCH_ROCM_ARCH nor versions.json names one arch"


def last_entry_line(chip_info: Path) -> int | None:
    """The line where aiter resolves a GPU_ARCHS list by `.split(";")[-1]`."""
    try:
        tree = ast.parse(chip_info.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "split"
                and isinstance(node.slice, ast.UnaryOp) and isinstance(node.slice.operand, ast.Constant)
                and node.slice.operand.value == 1):
            return node.lineno
    return None


def gpu_archs(ctx: Image) -> Finding:
    f = Finding("gpu-archs", "GPU_ARCHS / PYTORCH_ROCM_ARCH name one arch, the right one", OK,
                fix="set GPU_ARCHS and PYTORCH_ROCM_ARCH to exactly the target arch (one image per arch)")
    aiter = pyenv.locate(ctx, "aiter")
    where = ""
    if aiter and (line := last_entry_line(aiter.path / CHIP_INFO)):
        where = f" ({ctx.shown(aiter.path / CHIP_INFO)}:{line} takes the last entry)"
    problems, facts = [], []
    for var in ARCH_VARS:
        value = ctx.env.get(var)
        archs = split_archs(value or "")
        if value is None:
            facts.append(f"{var} unset: aiter/torch detect the GPU at run time")
        elif len(archs) > 1:
            problems.append(f"{var}={value!r} lists {len(archs)} archs; aiter runs {archs[-1]}{where}")
        elif ctx.arch and archs and archs[0] not in (ctx.arch, "native"):
            problems.append(f"{var}={value!r} but the target is {ctx.arch} ({ctx.arch_source})")
        else:
            facts.append(f"{var}={value!r}")
    f.status = PRESENT if problems else OK
    f.evidence = problems + facts
    return f


def fp8_table(dtypes_py: Path) -> tuple[dict[str, str], str | None, int | None]:
    """aiter's defaultDtypes (gfx -> torch fp8 name), the function get_dtype_fp8 asks for the gfx, its line."""
    tree = ast.parse(dtypes_py.read_text(errors="replace"))
    table: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "defaultDtypes" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                fp8 = _fp8_of(value)
                if isinstance(key, ast.Constant) and fp8:
                    table[str(key.value)] = fp8
    selector, line = None, None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_dtype_fp8":
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
            names = [c.func.id for c in calls if c.func.id.startswith("get_gfx")]
            selector, line = (names[0], node.lineno) if names else (None, node.lineno)
    return table, selector, line


def _fp8_of(value: ast.expr) -> str | None:
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "fp8" and isinstance(item, ast.Attribute):
                return item.attr
    return None


def fp8_dtype(ctx: Image) -> Finding:
    f = Finding("fp8-dtype", "fp8 dtype aiter picks matches the arch", UNKNOWN,
                fix="one arch in GPU_ARCHS (aiter's get_gfx() takes the last entry); e4m3fnuz on gfx942, e4m3fn on gfx950")
    aiter = pyenv.aiter(ctx, f.evidence)
    if aiter is None:
        return f
    dtypes_py = aiter.path / DTYPES
    try:
        table, selector, line = fp8_table(dtypes_py)
    except (OSError, SyntaxError, ValueError) as exc:
        f.evidence.append(f"cannot read {ctx.shown(dtypes_py)}: {type(exc).__name__}")
        return f
    shown = f"{ctx.shown(dtypes_py)}:{line}"
    if not table or selector is None:
        f.evidence.append(f"{shown}: no defaultDtypes table or get_dtype_fp8() that asks get_gfx*(): layout changed")
        return f
    if ctx.arch is None:
        f.evidence.append(f"target arch unknown ({ctx.arch_source}); aiter maps {_pairs(table)}")
        return f
    return _fp8_verdict(ctx, f, table, selector, shown)


def _fp8_verdict(ctx: Image, f: Finding, table: dict[str, str], selector: str, shown: str) -> Finding:
    want = ARCHS[ctx.arch].fp8_dtype
    archs = split_archs(ctx.env.get("GPU_ARCHS", "native"))
    if selector == "get_gfx_runtime" or not archs or archs == ["native"]:
        picked, why = ctx.arch, f"{selector}() asks the live GPU (rocminfo); GPU_ARCHS does not decide"
        if selector != "get_gfx_runtime":
            why = f"{selector}() with GPU_ARCHS unset/native asks the live GPU"
    else:
        picked, why = archs[-1], f"{selector}() takes GPU_ARCHS's last entry {archs[-1]!r}"
    got = table.get(picked, "uint8 (aiter's 8-bit fallback)")
    f.evidence.append(f"dtypes.fp8 = {got}: {why} ({shown})")
    f.status = OK if got == want else PRESENT
    if f.status == PRESENT:
        f.evidence.append(f"{ctx.arch} needs {want}")
    return f


def _pairs(table: dict[str, str]) -> str:
    return ", ".join(f"{k}->{v}" for k, v in table.items() if k in ARCHS)
