"""The Python sources a route is read from: ATOM's and aiter's packages as the image holds them, parsed, never
imported (importing aiter needs ROCm and may end the process).

A `Sources` maps a dotted module name under one of its package roots to its parsed module and answers what a
module-level name is bound to: a function or class defined there, an imported module or name (followed through
re-exports and `import *`), or a module-level constant.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Def:
    """A function or class defined in a walked package."""

    module: str
    qual: str  # "fused_moe", "FusedMoE", "FusedMoE.forward"
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef = field(compare=False, hash=False, repr=False)

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qual}"

    @property
    def package(self) -> str:
        return self.module.split(".")[0]


@dataclass(frozen=True)
class Expr:
    """A module-level `NAME = expr`, with the module it is evaluated in."""

    module: str
    node: ast.expr = field(compare=False, hash=False, repr=False)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    defs: dict[str, Def]  # module-level defs and classes by name
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None for the module itself)
    stars: list[str]  # modules imported with `from X import *`
    consts: dict[str, ast.expr]  # module-level `NAME = expr` (last one wins)
    is_package: bool


class Sources:
    def __init__(self, roots: dict[str, Path]):
        """roots: top-level package name -> its folder (e.g. {"atom": .../site-packages/atom})."""
        self.roots = roots
        self._modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> Module | None:
        top, *rest = name.split(".")
        root = self.roots.get(top)
        if root is None:
            return None
        base = root.joinpath(*rest)
        for path, package in ((base / "__init__.py", True), (base.with_suffix(".py"), False)):
            if path.is_file():
                tree = parsed(path)
                return _index(name, path, tree, package) if tree is not None else None
        return None

    def lookup(self, module: str, name: str, seen: frozenset = frozenset()) -> Def | str | Expr | None:
        """What `name` at module level of `module` is: a Def, a dotted module name (str), a module-level expression,
        or None when it is not bound in a walked package (torch, triton, ... or unknown)."""
        if (module, name) in seen:
            return None
        seen = seen | {(module, name)}
        mod = self.module(module)
        if mod is None:
            return None
        if name in mod.defs:
            return mod.defs[name]
        if name in mod.imports:
            target, attr = mod.imports[name]
            if attr is None:
                return target if self.module(target) is not None else None
            if self.module(f"{target}.{attr}") is not None:
                return f"{target}.{attr}"
            return self.lookup(target, attr, seen)
        if name in mod.consts:
            return Expr(module, mod.consts[name])
        for star in mod.stars:
            found = self.lookup(star, name, seen)
            if found is not None:
                return found
        return None

    def method(self, cls: Def, name: str, seen: frozenset = frozenset()) -> Def | None:
        """cls.name along cls's bases that are walked classes (first found, in base order)."""
        if cls.name in seen or not isinstance(cls.node, ast.ClassDef):
            return None
        for item in cls.node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                return Def(cls.module, f"{cls.qual}.{name}", item)
        for base in self.bases(cls):
            found = self.method(base, name, seen | {cls.name})
            if found is not None:
                return found
        return None

    def bases(self, cls: Def) -> list[Def]:
        out = []
        for base in cls.node.bases if isinstance(cls.node, ast.ClassDef) else []:
            found = self.resolve_expr(cls.module, base)
            if isinstance(found, Def) and isinstance(found.node, ast.ClassDef):
                out.append(found)
        return out

    def resolve_expr(self, module: str, expr: ast.expr) -> Def | str | Expr | None:
        """A Name or dotted Attribute chain at module level (`aiter.ops.x.f`, `envs`)."""
        if isinstance(expr, ast.Name):
            return self.lookup(module, expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve_expr(module, expr.value)
            if isinstance(owner, str):
                sub = f"{owner}.{expr.attr}"
                return sub if self.module(sub) is not None else self.lookup(owner, expr.attr)
        return None


_PARSED: dict[bytes, ast.Module | None] = {}


def parsed(path: Path) -> ast.Module | None:
    """The file's AST, parsed once per process per content (a walk parses ~160 files: most of its time; a copy of
    the same packages elsewhere reads the same trees); None for a file Python cannot parse."""
    data = path.read_bytes()
    key = hashlib.blake2b(data, digest_size=16).digest()
    if key not in _PARSED:
        try:
            _PARSED[key] = ast.parse(data)
        except (SyntaxError, ValueError):
            _PARSED[key] = None
    return _PARSED[key]


def _index(name: str, path: Path, tree: ast.Module, package: bool) -> Module:
    mod = Module(name, path, tree, {}, {}, [], {}, package)
    for node in _top_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            mod.defs[node.name] = Def(name, node.name, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    mod.imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    mod.imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(name, package, node)
            for alias in node.names:
                if alias.name == "*":
                    mod.stars.append(source)
                else:
                    mod.imports[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            mod.consts[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            mod.consts[node.target.id] = node.value
    return mod


def _top_level(body: list[ast.stmt]):
    """Module-level statements, including those under try/except and if (optional imports, version checks)."""
    for node in body:
        if isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
        elif isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        else:
            yield node


def _absolute(module: str, package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join([*parts, node.module] if node.module else parts)
