"""A failed aiter JIT build raises RuntimeError, never SystemExit.

SystemExit is a BaseException: `except Exception` fallbacks (CK-free builds
try a module and route to Triton when it cannot be built) never see it, and
the whole process exits instead. Upstream made the same change in March 2026
(aiter #2074); code that already raises RuntimeError is left as it is.
"""

from __future__ import annotations

import ast

from patches.engine import Patch, Plan, Step
from patches.finders import has_marker, marker, module_def, walk_with_ancestors
from patches.source import Drift, Edit, Source

NAME = "jit-core-runtime-error"
TARGET = "aiter/jit/core.py"
FUNC = "build_module"
WHY = "RuntimeError, so `except Exception` fallbacks see it"


def plan(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    exits = _raises_of(func, "SystemExit")
    if len(exits) > 1:
        lines = ", ".join(str(r.lineno) for r, _ in exits)
        raise Drift(
            exits[0][0].lineno, f"one `raise SystemExit(...)` in {FUNC}(), found {len(exits)} (lines {lines})"
        )
    if exits:
        return _rewrite(src, *exits[0])
    fixed = [r for r, handler in _raises_of(func, "RuntimeError") if handler is not None]
    if not fixed:
        raise Drift(func.lineno, f"`raise SystemExit(...)` for a failed build in an except block of {FUNC}()")
    if any(has_marker(src, r, NAME) for r in fixed):
        return Plan.already(f"failed builds raise RuntimeError (line {fixed[0].lineno})")
    return Plan.upstream(f"failed builds already raise RuntimeError upstream (line {fixed[0].lineno})")


def _raises_of(func: ast.FunctionDef, exc_name: str) -> list[tuple[ast.Raise, ast.ExceptHandler | None]]:
    """`raise exc_name(...)` statements, each with its innermost except handler."""
    found = []
    for node, ancestors in walk_with_ancestors(func):
        if isinstance(node, ast.Raise) and _exc_name(node.exc) == exc_name:
            handlers = [a for a in ancestors if isinstance(a, ast.ExceptHandler)]
            found.append((node, handlers[-1] if handlers else None))
    return found


def _exc_name(exc: ast.expr | None) -> str | None:
    if isinstance(exc, ast.Call):
        exc = exc.func
    return exc.id if isinstance(exc, ast.Name) else None


def _rewrite(src: Source, stmt: ast.Raise, handler: ast.ExceptHandler | None) -> Plan:
    exc_class = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    start, end = src.span(stmt)
    edits = [
        Edit(start, start, f"{marker(NAME, WHY)}\n{src.indent(stmt)}"),
        Edit(*src.span(exc_class), "RuntimeError"),
    ]
    if stmt.cause is None:
        # Chain from the build error so its traceback survives the re-raise.
        if handler is None or handler.name is None:
            raise Drift(
                stmt.lineno, "the SystemExit to sit in an `except ... as <name>:` block, to chain from"
            )
        edits.append(Edit(end, end, f" from {handler.name}"))
    return Plan.rewrite(f"line {stmt.lineno}: raise SystemExit -> raise RuntimeError (chained)", *edits)


PATCH = Patch(
    name=NAME,
    summary="aiter jit/core: a failed JIT build raises RuntimeError (chained), not SystemExit",
    steps=(Step(TARGET, plan),),
)
