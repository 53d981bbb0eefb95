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
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cleanbuild.core.atomic import replace_all

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


@dataclass(frozen=True)
class Summary:
    """What one module's source binds at its top level, read from its text alone: the names it binds directly, the
    modules it star-imports (absolute), its literal __all__, and whether a hook could answer for more."""

    names: frozenset[str]
    stars: tuple[str, ...]
    all: tuple[str, ...] | None
    dynamic: bool  # a module-level __getattr__, or a sys.meta_path hook


class Memo:
    """Per-file facts by the sha256 of the file's bytes (and, for a module, its name): a file parses once in a
    process however many trees hold it, and once in a whole bisection through a file every step loads and saves."""

    def __init__(self) -> None:
        self.summaries: dict[str, Summary] = {}
        self.imports: dict[str, tuple[tuple[int, str, str | None], ...]] = {}

    def summary(self, source: bytes, module: str, is_pkg: bool) -> Summary:
        key = f"{_digest(source)}:{module}:{int(is_pkg)}"
        if key not in self.summaries:
            self.summaries[key] = summarize(source, module, is_pkg)
        return self.summaries[key]

    def aiter_imports(self, source: bytes, file: str) -> tuple[tuple[int, str, str | None], ...]:
        key = _digest(source)
        if key not in self.imports:
            self.imports[key] = tuple(aiter_imports(source, file))
        return self.imports[key]

    def merge(self, other: Memo) -> Memo:
        """This memo with other's facts added; returns self."""
        self.summaries.update(other.summaries)
        self.imports.update(other.imports)
        return self

    def save(self, path: Path) -> None:
        data = {"summaries": {k: [sorted(s.names), s.stars, s.all, s.dynamic] for k, s in self.summaries.items()},
                "imports": self.imports}
        replace_all({path: json.dumps(data)})

    @classmethod
    def load(cls, path: Path) -> Memo:
        memo = cls()
        if path.is_file():
            data = json.loads(path.read_text())
            memo.summaries = {k: Summary(frozenset(n), tuple(st), None if a is None else tuple(a), d)
                              for k, (n, st, a, d) in data["summaries"].items()}
            memo.imports = {k: tuple((line, mod, name) for line, mod, name in v) for k, v in data["imports"].items()}
        return memo


MEMO = Memo()  # the process's own: pure facts of a file's bytes, so sharing them changes no answer


def _digest(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()


class Tree:
    """A package tree at one commit: module name -> source, read lazily through `read(path)`."""

    def __init__(self, paths: list[str], read: Callable[[str], bytes | None], memo: Memo = MEMO):
        self.files = {p for p in paths if p.endswith(".py")}
        # PEP 420 namespace packages (a folder of modules without __init__.py, like aiter/utility/).
        self.folders = {p.rsplit("/", i)[0] for p in self.files for i in range(1, p.count("/") + 1)}
        self.read = read
        self.memo = memo
        self._bindings: dict[str, set[str]] = {}
        self._summaries: dict[str, Summary | None] = {}
        self.dynamic: set[str] = set()  # modules with a module-level __getattr__ or a sys.meta_path hook

    def module_path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.files:
                return path
        return f"{base}/" if base in self.folders else None

    def summary(self, module: str) -> Summary | None:
        """The module's Summary, None when it has no source here (absent, or a namespace folder)."""
        if module not in self._summaries:
            path = self.module_path(module)
            source = self.read(path) if path and path.endswith(".py") else None
            self._summaries[module] = (None if source is None or path is None
                                       else self.memo.summary(source, module, path.endswith("__init__.py")))
        return self._summaries[module]

    def bindings(self, module: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """Top-level names of a module (its __getattr__, if any, is noted in self.dynamic)."""
        if module in self._bindings:
            return self._bindings[module]
        found = self.summary(module)
        names: set[str] = set()
        if found is not None:
            names = set(found.names)
            for target in found.stars:
                if target not in seen | {module}:
                    names |= self._star(target, seen | {module})
            if found.dynamic:
                self.dynamic.add(module)
        self._bindings[module] = names
        return names

    def _star(self, target: str, seen: frozenset[str]) -> set[str]:
        """What `from target import *` binds: its literal __all__, else its public names."""
        star = self.bindings(target, seen)
        target_summary = self.summary(target)
        public = target_summary.all if target_summary is not None else None
        return set(public) if public is not None else {n for n in star if not n.startswith("_")}

    def is_dynamic(self, module: str) -> bool:
        """The module, or a package above it, can answer for names it does not bind (so: undecidable)."""
        parts = module.split(".")
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for prefix in prefixes:
            self.bindings(prefix)
        return any(p in self.dynamic for p in prefixes)


def summarize(source: bytes, module: str, is_pkg: bool) -> Summary:
    """One module's Summary from its bytes (a file that does not parse binds nothing)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    names: set[str] = set()
    stars: list[str] = []
    dynamic = "meta_path" in source.decode(errors="replace")
    for node in _top_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            dynamic |= node.name == "__getattr__"
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            stars.append(resolve_relative(node, module, is_pkg))
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return Summary(frozenset(names), tuple(stars), _literal_all(tree), dynamic)


def _literal_all(tree: ast.Module) -> tuple[str, ...] | None:
    """A literal __all__ list or tuple assigned at the module's top level (not under if/try), else None."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
            return tuple(e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
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
        for line, module, name in atom.memo.aiter_imports(source, path):
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
