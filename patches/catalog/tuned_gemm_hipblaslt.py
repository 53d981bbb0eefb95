"""Untuned bf16/fp16 GEMM shapes default to hipBLASLt, not torch.

aiter's get_GEMM_A16W16_config() falls back to `libtype "torch"` when a shape is
not in the tuned CSV: F.linear without a tuned solution, measured up to 570x
slower. hipBLASLt with solidx -1 lets hipBLASLt pick its own heuristic kernel.

Which default is the untuned fallback: a torch default on the generic path. A
default in the body of a test that names an arch (`if gfx == "gfx1250" and ...:`,
`if skinny_traps(gfx, M):`) is that arch's special case and is left alone; the
`else` of such a test is the path every other arch takes, so a default there is
the generic one (aiter main since 2026-08: `if gfx == "gfx1250" ...: triton
else: torch`). Negated tests swap the two. The default may be written as
`cfg["libtype"] = "torch"` with `cfg["solidx"] = 0` anywhere in the same block,
as a dict literal (`cfg = {...}`, `cfg: dict = {...}`, `return {...}`,
`cfg.update(...)`, `dict(libtype=...)`), and may sit in a module-level helper
that get_GEMM_A16W16_config() calls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    arch_branch,
    assigned_target,
    block_of,
    called_module_defs,
    has_marker,
    marker_edit,
    module_def,
    subscript_assign,
    walk_with_ancestors,
)
from patches.source import Drift, Edit, Source

NAME = "tuned-gemm-hipblaslt"
TARGET = "aiter/tuned_gemm.py"
FUNC = "get_GEMM_A16W16_config"
WHY = "untuned shapes get hipBLASLt (solidx -1); torch is up to 570x slower"
ANCHOR = f'one untuned default `default_config["libtype"] = "torch"` on the generic path of {FUNC}()'


@dataclass(frozen=True)
class Default:
    """One statement that sets a config's libtype to a value (and maybe its solidx)."""

    stmt: ast.stmt
    libtype: ast.expr
    solidx: ast.expr | None
    special: bool  # on one arch's branch, not the generic path

    @property
    def value(self) -> object:
        return self.libtype.value if isinstance(self.libtype, ast.Constant) else None


def plan(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    generic = [d for d in find_defaults(src.tree, func) if not d.special]
    torch = [d for d in generic if d.value == "torch"]
    if len(torch) > 1:
        lines = ", ".join(str(d.stmt.lineno) for d in torch)
        raise Drift(torch[0].stmt.lineno, f"{ANCHOR}, found {len(torch)} (lines {lines})")
    if torch:
        return _rewrite(src, torch[0])
    hipblaslt = [d for d in generic if d.value == "hipblaslt"]
    if hipblaslt:
        stmt = hipblaslt[0].stmt
        if any(has_marker(src, d.stmt, NAME) for d in hipblaslt):
            return Plan.already(f"untuned default is hipblaslt (line {stmt.lineno})")
        return Plan.upstream(f"untuned default is already hipblaslt upstream (line {stmt.lineno})")
    raise Drift(func.lineno, f"{ANCHOR}, found none{_unreadable(generic)}")


def _unreadable(generic: list[Default]) -> str:
    # A libtype computed by an expression may hide the fallback; say where it is.
    lines = [str(d.stmt.lineno) for d in generic if not isinstance(d.libtype, ast.Constant)]
    return f" (libtype set by an expression at line {', '.join(lines)})" if lines else ""


# --- finding the defaults -------------------------------------------------------------


def find_defaults(tree: ast.Module, func: Def) -> list[Default]:
    """Every libtype assignment in func and in the module-level helpers it calls
    (transitively); a helper called from an arch branch is special as a whole."""
    found, todo, seen = [], [(func, False)], {func.name}
    while todo:
        scope, special = todo.pop(0)
        for node, ancestors in walk_with_ancestors(scope):
            default = _as_default(node, ancestors, special)
            if default is not None:
                found.append(default)
        for helper, site in called_module_defs(tree, scope):
            if helper.name not in seen:
                seen.add(helper.name)
                todo.append((helper, special or arch_branch(site) is not None))
    return found


def _as_default(node: ast.AST, ancestors: tuple[ast.AST, ...], special: bool) -> Default | None:
    if not isinstance(node, ast.stmt) or not ancestors:
        return None
    found = _libtype_and_var(node)
    if found is None:
        return None
    libtype, solidx, var = found
    if solidx is None and var is not None:
        solidx = _sibling_solidx(ancestors[-1], node, var)
    return Default(node, libtype, solidx, special or arch_branch((*ancestors, node)) is not None)


def _libtype_and_var(stmt: ast.stmt) -> tuple[ast.expr, ast.expr | None, str | None] | None:
    """(libtype value, solidx value or None, the config variable) for the shapes
    a default is written in; None when stmt sets no libtype."""
    target = assigned_target(stmt)
    var = (
        target.value.id if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) else None
    )
    value = subscript_assign(stmt, var, "libtype") if var is not None else None
    if value is not None:
        return value, None, var  # cfg["libtype"] = "torch"
    if isinstance(target, ast.Name) and isinstance(stmt, ast.Assign | ast.AnnAssign):
        mapping, var = _mapping(stmt.value), target.id  # cfg = {...} / cfg: dict = {...}
    elif isinstance(stmt, ast.Return) and stmt.value is not None:
        mapping, var = _mapping(stmt.value), None  # return {...}
    elif (update := _update(stmt)) is not None:
        call, var = update  # cfg.update({...}) / cfg.update(libtype=...)
        mapping = _mapping(call.args[0]) if call.args else _keywords(call)
    else:
        return None
    if mapping is None or "libtype" not in mapping:
        return None
    return mapping["libtype"], mapping.get("solidx"), var


def _mapping(expr: ast.expr | None) -> dict[str, ast.expr] | None:
    """The constant-keyed entries of a dict literal or a `dict(k=v)` call."""
    if isinstance(expr, ast.Dict):
        return {
            k.value: v
            for k, v in zip(expr.keys, expr.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        return _keywords(expr)
    return None


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}


def _update(stmt: ast.stmt) -> tuple[ast.Call, str] | None:
    """(the call, the variable) of `var.update(...)` with at least one argument; None for anything else."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "update"
        and isinstance(call.func.value, ast.Name)
        and len(call.args) + len(call.keywords) >= 1
    ):
        return call, call.func.value.id
    return None


def _sibling_solidx(parent: ast.AST, stmt: ast.stmt, var: str) -> ast.expr | None:
    """`var["solidx"] = ...` in the same block as stmt, before or after it; None
    unless there is exactly one (two would be ambiguous)."""
    values = [subscript_assign(s, var, "solidx") for s in block_of(parent, stmt) if s is not stmt]
    values = [v for v in values if v is not None]
    return values[0] if len(values) == 1 else None


# --- the rewrite ----------------------------------------------------------------------


def _rewrite(src: Source, default: Default) -> Plan:
    solidx = default.solidx
    if not (isinstance(solidx, ast.Constant) and isinstance(solidx.value, int)):
        raise Drift(
            default.stmt.lineno,
            'the torch default to come with one constant `solidx` (`default_config["solidx"] = 0` '
            "in the same block, or a solidx entry in the same dict)",
        )
    quote = "'" if src.segment(default.libtype).startswith("'") else '"'  # keep the file's quote style
    edits = [
        marker_edit(src, default.stmt, NAME, WHY),
        Edit(*src.span(default.libtype), f"{quote}hipblaslt{quote}"),
    ]
    if solidx.value != -1:
        edits.append(Edit(*src.span(solidx), "-1"))
    return Plan.rewrite(
        f'untuned default at line {default.stmt.lineno}: libtype "torch" solidx {solidx.value} '
        '-> "hipblaslt" solidx -1',
        *edits,
    )


PATCH = Patch(
    name=NAME,
    summary="aiter tuned_gemm: untuned shapes default to hipBLASLt (solidx -1) instead of torch",
    steps=(Step(TARGET, plan),),
)
