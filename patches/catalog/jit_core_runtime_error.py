"""A failed aiter JIT build raises RuntimeError, never SystemExit.

SystemExit is a BaseException: `except Exception` fallbacks (CK-free builds
try a module and route to Triton when it cannot be built) never see it, and
the whole process exits instead. Upstream made the same change in March 2026
(aiter #2074); code that already raises RuntimeError is left as it is.

Shapes: the exit is `raise SystemExit(...)` (with or without `from e`, in an
`except T as e:` or an `except T:` block) or `sys.exit(...)`, in build_module()
or in a module-level helper its except block calls. Already right, so
upstream-fixed: the failure path re-raises the original exception (bare
`raise`, `raise e`) or raises any Exception subclass (RuntimeError, or a class
of the module that derives from one).
"""

from __future__ import annotations

import ast
import builtins
from typing import TypeGuard

from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    called_module_defs,
    has_marker,
    marker_edit,
    module_def,
    walk_with_ancestors,
)
from patches.source import Drift, Edit, Source

NAME = "jit-core-runtime-error"
TARGET = "aiter/jit/core.py"
FUNC = "build_module"
WHY = "RuntimeError, so `except Exception` fallbacks see it"
CAUGHT = "_atom_build_error"  # the name given to an unnamed except block, to chain from


def plan(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    scopes = [func, *_failure_helpers(src.tree, func)]
    exits = [found for scope in scopes for found in _exits(scope)]
    if len(exits) > 1:
        lines = ", ".join(str(stmt.lineno) for stmt, _ in exits)
        raise Drift(
            exits[0][0].lineno, f"one `raise SystemExit(...)` in {FUNC}(), found {len(exits)} (lines {lines})"
        )
    if exits:
        return _rewrite(src, *exits[0])
    fixed = _catchable_raises(src.tree, func, scopes[1:])
    if not fixed:
        raise Drift(
            func.lineno,
            f"`raise SystemExit(...)` (or a raise of an Exception) for a failed build in an except "
            f"block of {FUNC}()",
        )
    if any(has_marker(src, stmt, NAME) for stmt in fixed):
        return Plan.already(f"failed builds raise RuntimeError (line {fixed[0].lineno})")
    return Plan.upstream(
        f"failed builds already raise a catchable exception upstream (line {fixed[0].lineno})"
    )


def _failure_helpers(tree: ast.Module, func: Def) -> list[Def]:
    """Module-level functions an except block of func calls: where the failure
    path may have moved. Helpers called elsewhere (mp_lock, _jit_compile) are
    not the failure path, so their own exits are not ours to change."""
    handlers = [node for node in ast.walk(func) if isinstance(node, ast.ExceptHandler)]
    found: dict[str, Def] = {}
    for handler in handlers:
        for helper, _ in called_module_defs(tree, handler):
            found.setdefault(helper.name, helper)
    return list(found.values())


def _exits(scope: Def) -> list[tuple[ast.Raise | ast.Expr, ast.ExceptHandler | None]]:
    """`raise SystemExit...` and `sys.exit(...)` statements, each with its innermost except handler."""
    found: list[tuple[ast.Raise | ast.Expr, ast.ExceptHandler | None]] = []
    for node, ancestors in walk_with_ancestors(scope):
        if _is_system_exit(node):
            handlers = [a for a in ancestors if isinstance(a, ast.ExceptHandler)]
            found.append((node, handlers[-1] if handlers else None))
    return found


def _is_system_exit(node: ast.AST) -> TypeGuard[ast.Raise | ast.Expr]:
    if isinstance(node, ast.Raise):
        return _class_name(node.exc) == "SystemExit"
    call = node.value if isinstance(node, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "exit"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "sys"
    )


def _class_name(exc: ast.expr | None) -> str | None:
    if isinstance(exc, ast.Call):
        exc = exc.func
    return exc.id if isinstance(exc, ast.Name) else None


# --- already right ----------------------------------------------------------------------


def _catchable_raises(tree: ast.Module, func: Def, helpers: list[Def]) -> list[ast.Raise]:
    """Raises on the failure path that an `except Exception` caller sees: in an
    except block of func, or anywhere in a helper that block calls."""
    found = []
    for scope in (func, *helpers):
        for node, ancestors in walk_with_ancestors(scope):
            if not isinstance(node, ast.Raise):
                continue
            handlers = [a for a in ancestors if isinstance(a, ast.ExceptHandler)]
            if scope is func and not handlers:
                continue  # a guard before the build, not the failure path
            if _reraises(node, handlers) or _is_exception_class(tree, _class_name(node.exc)):
                found.append(node)
    return found


def _reraises(stmt: ast.Raise, handlers: list[ast.ExceptHandler]) -> bool:
    """Bare `raise`, or `raise e` of the exception its except block caught."""
    if stmt.exc is None:
        return bool(handlers)
    names = {h.name for h in handlers if h.name}
    return isinstance(stmt.exc, ast.Name) and stmt.exc.id in names


def _is_exception_class(tree: ast.Module, name: str | None, depth: int = 0) -> bool:
    """A builtin Exception subclass, or a module-level class derived from one."""
    if name is None or depth > 10:
        return False
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type):
        return issubclass(builtin, Exception)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return any(
        _is_exception_class(tree, base.id, depth + 1)
        for cls in classes
        for base in cls.bases
        if isinstance(base, ast.Name)
    )


# --- the rewrite --------------------------------------------------------------------------


def _rewrite(src: Source, stmt: ast.stmt, handler: ast.ExceptHandler | None) -> Plan:
    edits = [marker_edit(src, stmt, NAME, WHY)]
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc_class = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        edits.append(Edit(*src.span(exc_class), "RuntimeError"))
        chained = stmt.cause is not None
        what = "raise SystemExit"
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        # sys.exit(message) -> raise RuntimeError(message)
        start, _ = src.span(stmt)
        edits.append(Edit(start, start, "raise "))
        edits.append(Edit(*src.span(stmt.value.func), "RuntimeError"))
        chained = False
        what = "sys.exit()"
    else:  # _exits finds nothing else
        raise Drift(stmt.lineno, "`raise SystemExit(...)` or `sys.exit(...)`")
    if not chained:
        # Chain from the build error so its traceback survives the re-raise.
        edits.extend(_chain(src, stmt, handler))
    return Plan.rewrite(f"line {stmt.lineno}: {what} -> raise RuntimeError (chained)", *edits)


def _chain(src: Source, stmt: ast.stmt, handler: ast.ExceptHandler | None) -> list[Edit]:
    if handler is None or handler.type is None:
        raise Drift(
            stmt.lineno, "the SystemExit to sit in an `except <type> [as <name>]:` block, to chain from"
        )
    _, end = src.span(stmt)
    if handler.name is not None:
        return [Edit(end, end, f" from {handler.name}")]
    _, type_end = src.span(handler.type)
    return [Edit(type_end, type_end, f" as {CAUGHT}"), Edit(end, end, f" from {CAUGHT}")]


PATCH = Patch(
    name=NAME,
    summary="aiter jit/core: a failed JIT build raises RuntimeError (chained), not SystemExit",
    steps=(Step(TARGET, plan),),
)
