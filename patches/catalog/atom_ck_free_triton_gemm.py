"""ATOM_CK_FREE=1 turns on ATOM's Triton GEMM path, like ATOM_USE_TRITON_GEMM=1.

A CK-free aiter build has no CK GEMM kernels, so ATOM's linear layers must
take the Triton route there. ATOM itself has no ATOM_CK_FREE at its pin
(181b0f46): its attention does not read it (the seed described another ATOM),
its bf16 MoE reads it only through atom-ck-free-triton-moe; python -m
validation.route shows where a CK-free server still reaches CK. Two files: use_triton_gemm() in atom/model_ops/linear.py also reads
envs.ATOM_CK_FREE, and atom/utils/envs.py gains that variable (default off,
"1" is on) when upstream does not define it yet.

Shapes of use_triton_gemm(): one `return <expr>` (a docstring and comments
around it are fine) becomes `return <expr> or envs.ATOM_CK_FREE`; a body with
several returns or logic before the return gets an early
`if envs.ATOM_CK_FREE: return True` as its first statement. `envs` is whatever
name the module binds atom.utils.envs to. Shapes of envs.py: the
`environment_variables` dict (annotated or not, one entry per line, the last
one with or without a comma); a variable already in the dict or bound at
module level is upstream's own.
"""

from __future__ import annotations

import ast
import re

from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    has_marker,
    marker,
    marker_edit,
    module_binds,
    module_def,
    words,
)
from patches.source import Drift, Edit, Source, end_line

NAME = "atom-ck-free-triton-gemm"
LINEAR = "atom/model_ops/linear.py"
ENVS = "atom/utils/envs.py"
VAR = "ATOM_CK_FREE"
WHY = "CK-free builds have no CK GEMM kernels; Triton must serve them"
ENTRY = f'"{VAR}": lambda: os.getenv("{VAR}", "0") == "1",'


def plan_linear(src: Source) -> Plan:
    func = module_def(src.tree, "use_triton_gemm")
    if VAR in words(func):
        marked = [s for s in ast.walk(func) if isinstance(s, ast.stmt) and has_marker(src, s, NAME)]
        if marked:
            return Plan.already(f"use_triton_gemm() reads {VAR} (line {marked[0].lineno})")
        return Plan.upstream(f"use_triton_gemm() already reads {VAR} upstream (line {func.lineno})")
    envs = envs_name(src.tree)
    body = _body_without_docstring(func)
    if not body or body[0].lineno == func.lineno:
        raise Drift(func.lineno, "use_triton_gemm()'s body on lines of its own")
    last = body[-1]
    if len(body) == 1 and isinstance(last, ast.Return) and last.value is not None:
        return _or_ck_free(src, last, last.value, envs)
    return _guard(src, func, body[0], envs)


def envs_name(tree: ast.Module) -> str:
    """The module-level name atom.utils.envs is bound to (`envs` unless aliased)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("utils"):
            for alias in node.names:
                if alias.name == "envs":
                    return alias.asname or "envs"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.endswith("utils.envs") and alias.asname:
                    return alias.asname
    if module_binds(tree, "envs"):
        return "envs"
    raise Drift(1, "`envs` imported at module level (from atom.utils import envs)")


def _body_without_docstring(func: Def) -> list[ast.stmt]:
    first = func.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return func.body[1:]
    return func.body


def _or_ck_free(src: Source, ret: ast.Return, value: ast.expr, envs: str) -> Plan:
    """`return X` (value: X) -> `return X or envs.ATOM_CK_FREE`: the smallest edit for the usual one-liner."""
    value_start, value_end = src.span(value)
    # Only these three bind more loosely than `or`; anything else takes " or ..." bare.
    bracket = isinstance(value, ast.IfExp | ast.Lambda | ast.NamedExpr)
    edits = [
        marker_edit(src, ret, NAME, WHY),
        Edit(value_end, value_end, f"{')' if bracket else ''} or {envs}.{VAR}"),
    ]
    if bracket:
        edits.append(Edit(value_start, value_start, "("))
    return Plan.rewrite(f"line {ret.lineno}: use_triton_gemm() also returns True for {VAR}=1", *edits)


def _guard(src: Source, func: Def, first: ast.stmt, envs: str) -> Plan:
    """Several returns, or logic before the return: an early `return True` for
    CK-free covers every path without touching them."""
    indent = src.indent(first)
    step = indent[len(src.indent(func)) :] or "    "
    start = src.line_start(first.lineno)
    if src.line(first.lineno)[: first.col_offset].strip():
        raise Drift(first.lineno, "use_triton_gemm()'s first statement on a line of its own")
    guard = f"{indent}{marker(NAME, WHY)}\n{indent}if {envs}.{VAR}:\n{indent}{step}return True\n"
    return Plan.rewrite(
        f"line {first.lineno}: use_triton_gemm() returns True first when {VAR}=1", Edit(start, start, guard)
    )


def plan_envs(src: Source) -> Plan:
    if module_binds(src.tree, VAR):  # a plain module attribute serves envs.ATOM_CK_FREE as well
        return Plan.upstream(f"{VAR} is already a module-level name upstream")
    table = _env_table(src.tree)
    entries = {
        k.value: (k, v) for k, v in zip(table.keys, table.values, strict=True) if isinstance(k, ast.Constant)
    }
    if VAR in entries:
        key = entries[VAR][0]
        if has_marker(src, key, NAME):
            return Plan.already(f"{VAR} is defined (line {key.lineno})")
        return Plan.upstream(f"{VAR} is already defined upstream (line {key.lineno})")
    if not module_binds(src.tree, "os"):
        raise Drift(1, "`import os` at module level, which the environment lambdas use")
    if not entries:
        raise Drift(table.lineno, "at least one string-keyed entry in environment_variables")
    # Next to its sibling switch when there is one, else after the last entry.
    key, value = entries.get("ATOM_USE_TRITON_GEMM") or list(entries.values())[-1]
    return _insert_after(src, key, value)


def _env_table(tree: ast.Module) -> ast.Dict:
    """The dict literal of `environment_variables = {...}` (annotated or not)."""
    found: list[ast.Assign | ast.AnnAssign | ast.AugAssign] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "environment_variables" for t in targets):
            found.append(node)
    if len(found) != 1 or not isinstance(found[0].value, ast.Dict):
        raise Drift(found[0].lineno if found else 1, "one `environment_variables = {...}` dict of lambdas")
    return found[0].value


def _insert_after(src: Source, key: ast.expr, value: ast.expr) -> Plan:
    indent = src.line(key.lineno)[: key.col_offset]
    _, value_end = src.span(value)
    last_line = end_line(value)
    rest = src.data[value_end : src.line_end(last_line)].decode("utf-8")
    layout = re.fullmatch(r"[ \t]*(,?)[ \t]*(#.*)?\r?\n?", rest)
    if indent.strip() or not layout:
        raise Drift(key.lineno, "environment_variables entries one to a line")
    at = src.line_end(last_line)
    edits = [Edit(at, at, f"{indent}{marker(NAME, WHY)}\n{indent}{ENTRY}\n")]
    if not layout.group(1):  # the anchor was the last entry, written without a comma
        edits.append(Edit(value_end, value_end, ","))
    return Plan.rewrite(f'line {last_line + 2}: adds {VAR} (default off, "1" is on)', *edits)


PATCH = Patch(
    name=NAME,
    summary="ATOM: use_triton_gemm() is True for ATOM_CK_FREE=1; envs.py gains ATOM_CK_FREE",
    steps=(Step(LINEAR, plan_linear), Step(ENVS, plan_envs)),
)
