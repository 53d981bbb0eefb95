"""What an aiter function is when the walker reaches it, read from aiter's own code.

- `@compile_ops("module_x", ...)`: a function of aiter's JIT module module_x. Its kind follows the module:
  hipBLASLt (module_hipbsolgemm), rocBLAS (module_rocsolgemm), assembly (a module whose name says asm), else a
  HIP/CK JIT module.
- `@triton.jit` (under `triton.autotune` or `triton.heuristics` too): a Triton kernel, reached by `kernel[grid](...)`.
- A function of aiter.ops.flydsl: a FlyDSL kernel.
- The CK modules a CK-free build leaves out: aiter's own `_get_ck_exclude_modules()` (aiter/jit/core.py), run on
  aiter's optCompilerConfig.json as the image holds them.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from validation.routing.source import Def, Sources, parsed

# How ATOM and aiter register torch.ops: by a call, or by decorating the function (named for it).
REGISTERS = (b"register_custom_op", b"custom_op", b"spliting_op", b"compile_guard")
TRITON, JIT, ASM, HIPBLASLT, ROCBLAS, FLYDSL = "triton", "jit", "asm", "hipblaslt", "rocblas", "flydsl"


def kind_of(src: Sources, d: Def) -> tuple[str, str, str] | None:
    """(kind, name, module) when d is a kernel entry of aiter, else None."""
    if not d.module.startswith("aiter"):
        return None
    module = compile_ops_module(src, d)
    if module is not None:
        return _module_kind(module), d.name, module
    return None


def _module_kind(module: str) -> str:
    if "hipbsolgemm" in module:
        return HIPBLASLT
    if "rocsolgemm" in module:
        return ROCBLAS
    if "asm" in module:
        return ASM
    return JIT


def compile_ops_module(src: Sources, d: Def) -> str | None:
    for deco in getattr(d.node, "decorator_list", []):
        if isinstance(deco, ast.Call) and _name(deco.func) == "compile_ops" and deco.args:
            first = deco.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return first.value
            found = src.lookup(d.module, first.id) if isinstance(first, ast.Name) else None
            if isinstance(found, ast.Constant) and isinstance(found.value, str):
                return found.value
            return f"<{ast.unparse(first)}>"
    return None


def is_triton(d: Def) -> bool:
    return any(_name(deco.func if isinstance(deco, ast.Call) else deco) in ("jit", "autotune", "heuristics")
               and "triton" in ast.unparse(deco) for deco in getattr(d.node, "decorator_list", []))


def _name(e: ast.expr) -> str:
    return e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else ""


def ck_modules(aiter_pkg: Path) -> set[str]:
    """aiter's own list of the JIT modules a CK-free build leaves out: _get_ck_exclude_modules() from the image's
    aiter/jit/core.py, run by itself on the image's optCompilerConfig.json."""
    core = aiter_pkg / "jit" / "core.py"
    tree = ast.parse(core.read_bytes())
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_get_ck_exclude_modules"),
                None)
    if func is None:
        raise ValueError(f"{core} has no _get_ck_exclude_modules(): aiter changed how it lists CK modules")
    namespace = {"os": os, "json": json, "this_dir": str(core.parent)}
    code = compile(ast.Module(body=[func], type_ignores=[]), str(core), "exec")
    exec(code, namespace)  # noqa: S102 - aiter's own function, from the image's aiter, on its own config
    return set(namespace["_get_ck_exclude_modules"]())


def custom_ops(src: Sources) -> dict:
    """torch.ops.<ns>.<name> -> the function registered under that name, from every walked module that registers
    custom ops (direct_register_custom_op(op_name=..., op_func=...), or a decorator named for it). Read once per set
    of package folders in a process (a scan of every file of both packages)."""
    key = tuple(sorted((name, str(root)) for name, root in src.roots.items()))
    if key not in _CUSTOM_OPS:
        _CUSTOM_OPS[key] = _scan_custom_ops(src)
    return _CUSTOM_OPS[key]


_CUSTOM_OPS: dict[tuple, dict] = {}


def _scan_custom_ops(src: Sources) -> dict:
    from validation.routing.values import Fn

    out: dict = {}
    for top, root in src.roots.items():
        for path in root.rglob("*.py"):
            data = path.read_bytes()
            if not any(word in data for word in REGISTERS):
                continue
            rel = path.relative_to(root).with_suffix("")
            parts = [top, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            module = ".".join(parts)
            tree = parsed(path)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and any(
                        any(w.decode() in ast.unparse(deco) for w in REGISTERS[1:]) for deco in node.decorator_list):
                    found = src.lookup(module, node.name)
                    if isinstance(found, Def):
                        out.setdefault(node.name, frozenset({Fn(found)}))
                if isinstance(node, ast.Call) and _name(node.func).endswith("register_custom_op"):
                    kw = {k.arg: k.value for k in node.keywords}
                    name, func = kw.get("op_name"), kw.get("op_func")
                    if isinstance(name, ast.Constant) and isinstance(func, ast.Name):
                        found = src.lookup(module, func.id)
                        if isinstance(found, Def):
                            out[name.value] = frozenset({Fn(found)})
    return out
