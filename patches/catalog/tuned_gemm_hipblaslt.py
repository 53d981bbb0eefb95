"""Untuned bf16/fp16 GEMM shapes default to hipBLASLt, not torch.

aiter's get_GEMM_A16W16_config() falls back to `libtype "torch"` when a shape is
not in the tuned CSV: F.linear without a tuned solution, measured up to 570x
slower. hipBLASLt with solidx -1 lets hipBLASLt pick its own heuristic kernel.
Arch special cases that upstream routes elsewhere (gfx1250 to Triton, or to
torch for shapes its skinny kernel traps on) sit under a test that names the
arch; they are left alone.
"""

from __future__ import annotations

import ast

from patches.engine import Patch, Plan, Step
from patches.finders import (
    has_marker,
    marker,
    module_def,
    next_sibling,
    subscript_assign,
    walk_with_ancestors,
    words,
)
from patches.source import Drift, Edit, Source

NAME = "tuned-gemm-hipblaslt"
TARGET = "aiter/tuned_gemm.py"
FUNC = "get_GEMM_A16W16_config"
WHY = "untuned shapes get hipBLASLt (solidx -1); torch is up to 570x slower"
ANCHOR = 'one untuned default `default_config["libtype"] = "torch"` in get_GEMM_A16W16_config()'


def plan(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    torch_defaults = _defaults(func, "torch")
    if len(torch_defaults) > 1:
        lines = ", ".join(str(stmt.lineno) for stmt, _ in torch_defaults)
        raise Drift(torch_defaults[0][0].lineno, f"{ANCHOR}, found {len(torch_defaults)} (lines {lines})")
    if torch_defaults:
        return _rewrite(src, *torch_defaults[0])
    hipblaslt_defaults = _defaults(func, "hipblaslt")
    if len(hipblaslt_defaults) == 1:
        stmt = hipblaslt_defaults[0][0]
        if has_marker(src, stmt, NAME):
            return Plan.already(f"untuned default is hipblaslt (line {stmt.lineno})")
        return Plan.upstream(f"untuned default is already hipblaslt upstream (line {stmt.lineno})")
    raise Drift(func.lineno, f"{ANCHOR}, found none")


def _defaults(func: ast.FunctionDef, libtype: str) -> list[tuple[ast.stmt, ast.AST]]:
    """`default_config["libtype"] = libtype` statements outside any arch-specific branch."""
    found = []
    for node, ancestors in walk_with_ancestors(func):
        value = subscript_assign(node, "default_config", "libtype")
        if not (isinstance(value, ast.Constant) and value.value == libtype):
            continue
        tests = [a.test for a in ancestors if isinstance(a, ast.If)]
        if not any("gfx" in word for test in tests for word in words(test)):
            found.append((node, ancestors[-1]))
    return found


def _rewrite(src: Source, stmt: ast.Assign, parent: ast.AST) -> Plan:
    solidx = next_sibling(parent, stmt)
    solidx_value = solidx and subscript_assign(solidx, "default_config", "solidx")
    if not (isinstance(solidx_value, ast.Constant) and solidx_value.value == 0):
        raise Drift(stmt.lineno, 'the torch default to be followed by `default_config["solidx"] = 0`')
    start, _ = src.span(stmt)
    quote = "'" if src.segment(stmt.value).startswith("'") else '"'  # keep the file's quote style
    return Plan.rewrite(
        f'untuned default at line {stmt.lineno}: libtype "torch" solidx 0 -> "hipblaslt" solidx -1',
        Edit(start, start, f"{marker(NAME, WHY)}\n{src.indent(stmt)}"),
        Edit(*src.span(stmt.value), f"{quote}hipblaslt{quote}"),
        Edit(*src.span(solidx_value), "-1"),
    )


PATCH = Patch(
    name=NAME,
    summary="aiter tuned_gemm: untuned shapes default to hipBLASLt (solidx -1) instead of torch",
    steps=(Step(TARGET, plan),),
)
