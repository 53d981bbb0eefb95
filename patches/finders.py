"""Small ast queries shared by the patches. Each one that anchors a patch raises
Drift instead of returning nothing: a build must not skip a rewrite silently."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from patches.source import Drift, Source

MARK = "# atom-build({name}):"


def marker(name: str, why: str) -> str:
    """The comment a patch leaves above what it changed: says who and why, and lets
    the next run tell "already applied" from "fixed upstream"."""
    return f"{MARK.format(name=name)} {why}"


def has_marker(src: Source, stmt: ast.stmt, name: str) -> bool:
    return src.comment_above(stmt).startswith(MARK.format(name=name))


def module_def(tree: ast.Module, name: str) -> ast.FunctionDef:
    """The one module-level `def name`; Drift when absent or defined twice."""
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]
    if len(found) != 1:
        lines = ", ".join(str(n.lineno) for n in found)
        where = f"found {len(found)} (lines {lines})" if found else "found none"
        raise Drift(found[0].lineno if found else 1, f"one module-level `def {name}`, {where}")
    return found[0]


def module_binds(tree: ast.Module, name: str) -> bool:
    """Whether the module binds `name` at top level (import, assignment or def)."""
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        if name in bound:
            return True
    return False


def walk_with_ancestors(
    node: ast.AST, ancestors: tuple[ast.AST, ...] = ()
) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """Like ast.walk, but each node comes with the chain of nodes above it."""
    yield node, ancestors
    for child in ast.iter_child_nodes(node):
        yield from walk_with_ancestors(child, (*ancestors, node))


def words(node: ast.AST) -> set[str]:
    """Every identifier, attribute name and string constant inside a node."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.add(sub.value)
    return found


def subscript_assign(stmt: ast.AST, var: str, key: str) -> ast.expr | None:
    """The value of `var["key"] = value`, or None when stmt is not that."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target = stmt.targets[0]
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == var
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == key
    ):
        return stmt.value
    return None


def next_sibling(parent: ast.AST, stmt: ast.stmt) -> ast.stmt | None:
    """The statement after stmt in whichever body of parent holds it."""
    for field in ("body", "orelse", "finalbody", "handlers"):
        body = getattr(parent, field, None)
        if isinstance(body, list) and stmt in body:
            index = body.index(stmt)
            return body[index + 1] if index + 1 < len(body) else None
    return None
