"""Does ATOM at one commit import only what aiter at another commit has? A static check, with ast.

Every `from aiter[.x.y] import name` and `import aiter.x.y` in ATOM's package must resolve in aiter's tree: the
module exists (x/y.py or x/y/__init__.py), and each name is a submodule or is bound at the module's top level
(def, class, assignment, import, including under top-level if/try, and through `from .m import *`, honouring
a literal __all__). Imports inside a `try` that catches ImportError (or Exception) are optional, and imports under
`if TYPE_CHECKING:` never run: both are left out. What cannot be decided statically (a name only a module-level
__getattr__ or a sys.meta_path hook could provide) is counted apart as undecided, never as missing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

OPTIONAL_HANDLERS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Missing:
    file: str
    line: int
    module: str
    name: str | None  # None: the module itself is missing

    def __str__(self) -> str:
        what = f"{self.module}.{self.name}" if self.name else self.module
        return f"{what} ({self.file}:{self.line})"


class Tree:
    """A package tree at one commit: module name -> source, read lazily through `read(path)`."""

    def __init__(self, paths: list[str], read: Callable[[str], bytes | None]):
        self.files = {p for p in paths if p.endswith(".py")}
        # PEP 420 namespace packages (a folder of modules without __init__.py, like aiter/utility/).
        self.folders = {p.rsplit("/", i)[0] for p in self.files for i in range(1, p.count("/") + 1)}
        self.read = read
        self._bindings: dict[str, set[str]] = {}
        self.dynamic: set[str] = set()  # modules with a module-level __getattr__ or a sys.meta_path hook

    def module_path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.files:
                return path
        return f"{base}/" if base in self.folders else None

    def bindings(self, module: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """Top-level names of a module (its __getattr__, if any, is noted in self.dynamic)."""
        if module in self._bindings:
            return self._bindings[module]
        path = self.module_path(module)
        source = self.read(path) if path and path.endswith(".py") else None
        names: set[str] = set()
        if source is not None:
            try:
                tree = ast.parse(source)
            except SyntaxError:
                tree = ast.Module(body=[], type_ignores=[])
            is_pkg = path is not None and path.endswith("__init__.py")  # a source was read: there is a path
            names = self._collect(tree, module, is_pkg, seen | {module})
            if "meta_path" in source.decode(errors="replace"):
                self.dynamic.add(module)
        self._bindings[module] = names
        return names

    def is_dynamic(self, module: str) -> bool:
        """The module, or a package above it, can answer for names it does not bind (so: undecidable)."""
        parts = module.split(".")
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for prefix in prefixes:
            self.bindings(prefix)
        return any(p in self.dynamic for p in prefixes)

    def _collect(self, tree: ast.Module, module: str, is_pkg: bool, seen: frozenset[str]) -> set[str]:
        names: set[str] = set()
        for node in _top_level(tree.body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == "__getattr__":
                    self.dynamic.add(module)
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.Import):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names |= self._import_from(node, module, is_pkg, seen)
        return names

    def _import_from(self, node: ast.ImportFrom, module: str, is_pkg: bool, seen: frozenset[str]) -> set[str]:
        target = resolve_relative(node, module, is_pkg)
        if any(a.name == "*" for a in node.names):
            if target in seen:
                return set()
            star = self.bindings(target, seen) or set()
            public = self._all(target)
            return set(public) if public is not None else {n for n in star if not n.startswith("_")}
        return {a.asname or a.name for a in node.names}

    def _all(self, module: str) -> list[str] | None:
        path = self.module_path(module)
        source = self.read(path) if path and path.endswith(".py") else None
        if source is None:
            return None
        for node in ast.parse(source).body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)


def resolve_relative(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_pkg else parts[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def aiter_imports(source: bytes, file: str) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name) of every non-optional import of aiter in one ATOM file (name None: `import aiter.x`)."""
    if b"aiter" not in source:  # no import of aiter can be spelled without the word: nothing to parse
        return
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node, optional in _walk(tree, False):
        if optional:
            continue
        if isinstance(node, ast.ImportFrom) and not node.level and node.module and node.module.split(".")[0] == "aiter":
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "aiter":
                    yield node.lineno, alias.name, None


def _walk(node: ast.AST, optional: bool) -> Iterator[tuple[ast.AST, bool]]:
    yield node, optional
    if isinstance(node, ast.Try):
        # A bare `except:` has no type to walk (ast.walk(None) raises); it guards everything (below).
        catches = {n.id for h in node.handlers if h.type is not None for n in ast.walk(h.type) if isinstance(n, ast.Name)}
        guarded = optional or bool(catches & OPTIONAL_HANDLERS) or any(h.type is None for h in node.handlers)
        for child in node.body:
            yield from _walk(child, guarded)
        for child in [*node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]:
            yield from _walk(child, optional)
        return
    if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        for child in node.orelse:
            yield from _walk(child, optional)
        return
    for sub in ast.iter_child_nodes(node):
        if not isinstance(sub, ast.expr):  # an expression holds no statement, so no import: not walked
            yield from _walk(sub, optional)


@dataclass(frozen=True)
class Result:
    checked: int  # import statements looked at
    missing: tuple[Missing, ...]
    undecided: tuple[Missing, ...]  # resolved only through a __getattr__ / import hook: not decidable statically


def unresolved(atom: Tree, aiter: Tree) -> Result:
    """Every aiter import of ATOM's package that aiter's tree does not provide."""
    checked, missing, undecided = 0, [], []
    for path in sorted(p for p in atom.files if p.startswith("atom/")):
        source = atom.read(path)
        if source is None:
            continue
        for line, module, name in aiter_imports(source, path):
            checked += 1
            found = _resolves(aiter, module, name)
            if found is None:
                undecided.append(Missing(path, line, module, name))
            elif not found:
                missing.append(Missing(path, line, module, None if aiter.module_path(module) is None else name))
    return Result(checked, tuple(missing), tuple(undecided))


def _resolves(aiter: Tree, module: str, name: str | None) -> bool | None:
    """True/False, or None when only a dynamic hook could answer."""
    if aiter.module_path(module) is None:
        return None if aiter.is_dynamic(module.rsplit(".", 1)[0]) else False
    if name is None or aiter.module_path(f"{module}.{name}") or name in aiter.bindings(module):
        return True
    return None if aiter.is_dynamic(module) else False
