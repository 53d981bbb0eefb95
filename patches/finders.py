"""Small ast queries shared by the patches. Each one that anchors a patch raises
Drift instead of returning nothing: a build must not skip a rewrite silently."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TypeGuard

from patches.source import Drift, Edit, Node, Source, end_line

Def = ast.FunctionDef | ast.AsyncFunctionDef  # a `def`, either kind: the patches read both alike

MARK = "# atom-build({name}):"
ARCH_WORD = "gfx"  # every AMD arch name (gfx942, gfx950, gfx1250) and aiter's get_gfx()


def marker(name: str, why: str) -> str:
    """The comment a patch leaves above what it changed: says who and why, and lets
    the next run tell "already applied" from "fixed upstream"."""
    return f"{MARK.format(name=name)} {why}"


def has_marker(src: Source, stmt: Node, name: str) -> bool:
    return src.comment_above(stmt).startswith(MARK.format(name=name))


def marker_edit(src: Source, stmt: ast.stmt, name: str, why: str) -> Edit:
    """Insert the marker on a line of its own above stmt. A statement that shares
    its line (`else: x = 1`) has no line above it to hold the comment."""
    start, _ = src.span(stmt)
    if src.line(stmt.lineno)[: stmt.col_offset].strip():
        raise Drift(stmt.lineno, "the statement to patch on a line of its own")
    return Edit(start, start, f"{marker(name, why)}\n{src.indent(stmt)}")


def guard_edit(src: Source, stmt: ast.stmt, name: str, why: str, test: str, then: str) -> Edit:
    """`if <test>: <then>` on lines of their own just above stmt, under the patch's marker."""
    if src.line(stmt.lineno)[: stmt.col_offset].strip():
        raise Drift(stmt.lineno, "the statement to guard on a line of its own")
    indent = src.indent(stmt)
    start = src.line_start(stmt.lineno)
    return Edit(start, start, f"{indent}{marker(name, why)}\n{indent}if {test}:\n{indent}    {then}\n")


def append_edit(src: Source, text: str) -> Edit:
    """text at the end of the module (after a newline the file may lack)."""
    end = len(src.data)
    lead = "" if src.data.endswith(b"\n") or not src.data else "\n"
    return Edit(end, end, lead + text)


def import_envs_edit(src: Source, name: str, why: str) -> Edit:
    """`from atom.utils import envs` (under the patch's marker) after the module's last top-level import."""
    imports = [n for n in src.tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    if not imports:
        raise Drift(1, "module-level imports to add `from atom.utils import envs` after")
    at = src.line_end(end_line(imports[-1]))
    return Edit(at, at, f"{marker(name, why)}\nfrom atom.utils import envs\n")


def module_class(tree: ast.Module, name: str) -> ast.ClassDef:
    """The one module-level `class name`; Drift when absent or defined twice."""
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if len(found) != 1:
        raise Drift(found[0].lineno if found else 1, f"one module-level class {name}, found {len(found)}")
    return found[0]


def class_method(cls: ast.ClassDef, name: str) -> Def:
    """The one `def name` in cls's own body; Drift when absent or defined twice."""
    found = [n for n in cls.body if _is_def(n) and n.name == name]
    if len(found) != 1:
        raise Drift(cls.lineno, f"one {cls.name}.{name}, found {len(found)}")
    return found[0]


def first_statement(func: Def) -> ast.stmt:
    """func's first statement after its docstring (the docstring itself when that is all), on a line of its own."""
    body = func.body
    first = body[1] if _docstring(body[0]) and len(body) > 1 else body[0]
    if first.lineno == func.lineno:
        raise Drift(func.lineno, f"{func.name}'s body on lines of its own")
    return first


def _docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def module_def(tree: ast.Module, name: str) -> Def:
    """The one module-level `def name`; Drift when absent or defined twice."""
    found = [node for node in tree.body if _is_def(node) and node.name == name]
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
        elif isinstance(node, Def | ast.ClassDef):
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
    """The value of `var["key"] = value` (or `var["key"]: T = value`), or None when stmt is not that."""
    if not isinstance(stmt, ast.Assign | ast.AnnAssign):
        return None
    target = assigned_target(stmt)
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == var
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == key
    ):
        return stmt.value
    return None


def assigned_target(stmt: ast.AST) -> ast.expr | None:
    """The single target of `t = value` or `t: T = value`; None for anything else."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return stmt.target
    return None


def block_of(parent: ast.AST, stmt: ast.stmt) -> list[ast.stmt]:
    """The statement list of parent (body, else, finally, ...) that holds stmt."""
    for field in ("body", "orelse", "finalbody"):
        body = getattr(parent, field, None)
        if isinstance(body, list) and any(s is stmt for s in body):
            return body
    return []


def next_sibling(parent: ast.AST, stmt: ast.stmt) -> ast.stmt | None:
    """The statement after stmt in whichever body of parent holds it."""
    body = block_of(parent, stmt)
    index = next((i for i, s in enumerate(body) if s is stmt), None)
    return body[index + 1] if index is not None and index + 1 < len(body) else None


# --- calls into module-level helpers ---------------------------------------------


def module_defs(tree: ast.Module) -> dict[str, Def]:
    return {node.name: node for node in tree.body if _is_def(node)}


def called_module_defs(
    tree: ast.Module, node: ast.AST
) -> Iterator[tuple[Def, tuple[ast.AST, ...]]]:
    """Module-level functions called by plain name under node, each with the
    ancestor chain of its call site (first call site only)."""
    defs, seen = module_defs(tree), set()
    for call, ancestors in walk_with_ancestors(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            helper = defs.get(call.func.id)
            if helper is not None and helper is not node and helper.name not in seen:
                seen.add(helper.name)
                yield helper, (*ancestors, call)


def _is_def(node: ast.AST) -> TypeGuard[Def]:
    return isinstance(node, Def)


# --- arch branches ------------------------------------------------------------------
# A statement under `if <test naming an arch>:` is that arch's special case; the
# `else` of such a test is the generic path every other arch takes. Negated tests
# (`gfx != "gfx1250"`, `not is_gfx1250()`) swap the two.

_NEGATIVE_OPS = (ast.NotEq, ast.NotIn, ast.IsNot)


def names_arch(node: ast.AST) -> bool:
    return any(ARCH_WORD in word.lower() for word in words(node))


def selects_arch(test: ast.expr) -> bool:
    """True when `test` holding means the arch is one the test names."""
    if not names_arch(test):
        return False
    if isinstance(test, ast.BoolOp):
        parts = [selects_arch(value) for value in test.values]
        return any(parts) if isinstance(test.op, ast.And) else all(parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return excludes_arch(test.operand)
    if isinstance(test, ast.Compare):
        return not all(isinstance(op, _NEGATIVE_OPS) for op in test.ops)
    return True  # an arch predicate: is_gfx1250(), skinny_traps(gfx, M)


def excludes_arch(test: ast.expr) -> bool:
    """True when `test` failing means the arch is one the test names."""
    if not names_arch(test):
        return False
    if isinstance(test, ast.BoolOp):
        parts = [excludes_arch(value) for value in test.values]
        return any(parts) if isinstance(test.op, ast.Or) else all(parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return selects_arch(test.operand)
    if isinstance(test, ast.Compare):
        return all(isinstance(op, _NEGATIVE_OPS) for op in test.ops)
    return False


def arch_branch(chain: tuple[ast.AST, ...]) -> ast.AST | None:
    """The `if` or `case` along chain (outermost first, the node itself last)
    whose branch holding the node is one arch's special case; None when the node
    is on the generic path."""
    for parent, child in zip(chain, chain[1:], strict=False):
        if isinstance(parent, ast.If):
            if _holds(parent.body, child) and selects_arch(parent.test):
                return parent
            if _holds(parent.orelse, child) and excludes_arch(parent.test):
                return parent
        elif isinstance(parent, ast.Match) and isinstance(child, ast.match_case):
            named = names_arch(parent.subject) or names_arch(child.pattern)
            if named and not _wildcard(child.pattern):
                return child
    return None


def _holds(body: list[ast.stmt], node: ast.AST) -> bool:
    return any(stmt is node for stmt in body)


def _wildcard(pattern: ast.pattern) -> bool:
    return isinstance(pattern, ast.MatchAs) and pattern.pattern is None
