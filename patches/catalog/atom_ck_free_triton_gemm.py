"""ATOM_CK_FREE=1 turns on ATOM's Triton GEMM path, like ATOM_USE_TRITON_GEMM=1.

A CK-free aiter build has no CK GEMM kernels, so ATOM's linear layers must
take the Triton route there, as its attention and MoE code already do for
CK-free. Two files: use_triton_gemm() in atom/model_ops/linear.py also reads
envs.ATOM_CK_FREE, and atom/utils/envs.py gains that variable (default off,
"1" is on) when upstream does not define it yet.
"""

from __future__ import annotations

import ast
import re

from patches.engine import Patch, Plan, Step
from patches.finders import has_marker, marker, module_binds, module_def, words
from patches.source import Drift, Edit, Source

NAME = "atom-ck-free-triton-gemm"
LINEAR = "atom/model_ops/linear.py"
ENVS = "atom/utils/envs.py"
VAR = "ATOM_CK_FREE"
WHY = "CK-free builds have no CK GEMM kernels; Triton must serve them"
ENTRY = f'"{VAR}": lambda: os.getenv("{VAR}", "0") == "1",'


def plan_linear(src: Source) -> Plan:
    func = module_def(src.tree, "use_triton_gemm")
    returns = [node for node in ast.walk(func) if isinstance(node, ast.Return)]
    if VAR in words(func):
        if any(has_marker(src, r, NAME) for r in returns):
            return Plan.already(f"use_triton_gemm() reads {VAR} (line {func.lineno})")
        return Plan.upstream(f"use_triton_gemm() already reads {VAR} upstream (line {func.lineno})")
    if len(returns) != 1 or returns[0].value is None:
        raise Drift(
            func.lineno, f"use_triton_gemm() to end in one `return <expr>`, found {len(returns)} returns"
        )
    ret = returns[0]
    if ret.lineno == func.lineno:
        raise Drift(ret.lineno, "use_triton_gemm()'s return statement on a line of its own")
    if not module_binds(src.tree, "envs"):
        raise Drift(1, "`envs` imported at module level (from atom.utils import envs)")
    start, _ = src.span(ret)
    value_start, value_end = src.span(ret.value)
    # Only these three bind more loosely than `or`; anything else takes " or ..." bare.
    bracket = isinstance(ret.value, ast.IfExp | ast.Lambda | ast.NamedExpr)
    edits = [
        Edit(start, start, f"{marker(NAME, WHY)}\n{src.indent(ret)}"),
        Edit(value_end, value_end, f"{')' if bracket else ''} or envs.{VAR}"),
    ]
    if bracket:
        edits.append(Edit(value_start, value_start, "("))
    return Plan.rewrite(f"line {ret.lineno}: use_triton_gemm() also returns True for {VAR}=1", *edits)


def plan_envs(src: Source) -> Plan:
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
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "environment_variables" for t in targets):
            found.append(node)
    if len(found) != 1 or not isinstance(found[0].value, ast.Dict):
        raise Drift(found[0].lineno if found else 1, "one `environment_variables = {...}` dict of lambdas")
    return found[0].value


def _insert_after(src: Source, key: ast.expr, value: ast.expr) -> Plan:
    indent = src.line(key.lineno)[: key.col_offset]
    _, value_end = src.span(value)
    rest = src.data[value_end : src.line_end(value.end_lineno)].decode("utf-8")
    layout = re.fullmatch(r"[ \t]*(,?)[ \t]*(#.*)?\r?\n?", rest)
    if indent.strip() or not layout:
        raise Drift(key.lineno, "environment_variables entries one to a line")
    at = src.line_end(value.end_lineno)
    edits = [Edit(at, at, f"{indent}{marker(NAME, WHY)}\n{indent}{ENTRY}\n")]
    if not layout.group(1):  # the anchor was the last entry, written without a comma
        edits.append(Edit(value_end, value_end, ","))
    return Plan.rewrite(f'line {value.end_lineno + 2}: adds {VAR} (default off, "1" is on)', *edits)


PATCH = Patch(
    name=NAME,
    summary="ATOM: use_triton_gemm() is True for ATOM_CK_FREE=1; envs.py gains ATOM_CK_FREE",
    steps=(Step(LINEAR, plan_linear), Step(ENVS, plan_envs)),
)
