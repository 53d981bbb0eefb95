"""The host package's folders are its layers: the order docs/architecture.md writes once ("## Layers"), checked on
the real import graph, read from the source (ast) with imports inside functions included: no module imports from a
folder above its own or from a peer on its floor, no module takes part in an import cycle, one module imports
subprocess, one module starts containers. Plus the rules inside a floor that the design keeps (the Docker boundary
does not depend on the planner, the report does not call the engine). Modules are named by their dotted path under
cleanbuild: "core.engine", "images.plan"."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.support.imports import closure

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cleanbuild"


def layer_order() -> list[tuple[str, ...]]:
    """The floors, lowest first, from docs/architecture.md's "## Layers" list: "1. `core`: ..."."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    return [tuple(re.findall(r"`(\w+)`", line.split(":", 1)[0])) for line in section.splitlines()
            if re.match(r"\d+\. `", line)]


LAYERS = layer_order()
RANK = {package: floor for floor, packages in enumerate(LAYERS) for package in packages}
MODULES = sorted(".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py")
                 if p.name != "__init__.py")
FOUNDATION = tuple(m for m in MODULES if m.startswith("core."))


def source(module: str) -> Path:
    return PACKAGE / f"{module.replace('.', '/')}.py"


@functools.cache  # the sources do not change during a run; reached() asks for each module many times
def direct_imports(module: str) -> frozenset[str]:
    """The cleanbuild modules one module imports anywhere in its source (module level or inside a function)."""
    tree = ast.parse(source(module).read_text())
    package = module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:  # from . import x / from ..x import y
            base = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cleanbuild."):
            base = node.module.split(".")[1:]
        elif isinstance(node, ast.Import):
            found |= {".".join(a.name.split(".")[1:]) for a in node.names if a.name.startswith("cleanbuild.")}
            continue
        else:
            continue
        found |= {".".join([*base, a.name]) for a in node.names} | {".".join(base)}
    return frozenset(m for m in found if m and source(m).is_file())


def reached(module: str) -> set[str]:
    """Every cleanbuild module that importing `module` can import, directly or through others."""
    return closure(module, direct_imports)


@pytest.mark.parametrize(("module", "below"), [
    ("core.engine", "images.plan"), ("images.buildx", "images.plan"), ("images.report", "core.engine"), ("core.spec", "images.plan"),
    ("images.record", "core.engine"),
])
def test_a_lower_layer_never_reaches_a_higher_one(module, below):
    assert below not in reached(module)


def test_the_order_is_written_once_and_names_every_folder():
    assert LAYERS[0] == ("core",) and LAYERS[-1] == ("cli",)
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(RANK) == folders


def test_the_package_root_holds_no_module_but_its_init():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"]


def test_no_module_imports_from_above_its_floor_or_from_a_peer():
    wrong = {}
    for module in MODULES:
        mine = module.split(".")[0]
        for other in direct_imports(module):
            theirs = other.split(".")[0]
            if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
                wrong.setdefault(module, []).append(other)
    assert wrong == {}


def test_no_import_cycle():
    cycles = [m for m in MODULES if m in reached(m)]
    assert cycles == []


@pytest.mark.parametrize("module", FOUNDATION)
def test_the_foundation_reaches_nothing_above_it(module):
    assert {m for m in reached(module) if not m.startswith("core.")} == set()


def test_one_module_imports_subprocess():
    importers = []
    for module in MODULES:
        tree = ast.parse(source(module).read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if "subprocess" in names:
            importers.append(module)
    assert importers == ["core.run"]


def test_the_walk_sees_function_level_imports():
    assert {"images.plan", "core.engine", "images.report"} <= reached("images.steps")
    assert "gpuhost.gpu" in direct_imports("commands.audit_image")  # imported inside a function
    assert "upstream.pins" in direct_imports("commands.sources")  # `from cleanbuild.upstream import pins`, in a function
    assert "core.errors" in direct_imports("images.plan")  # `from cleanbuild.core.errors import UsageError`


def test_the_shared_types_live_in_the_foundation():
    assert "core.spec" in direct_imports("core.engine") and "core.spec" in direct_imports("images.buildx")


def container_calls(module: str) -> list[int]:
    """Lines where a module calls `<client>.containers.run(...)` or `.create(...)`: starts or makes a container."""
    tree = ast.parse(source(module).read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("run", "create")
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "containers"]


def test_only_the_engine_creates_containers():
    assert "images.steps" in MODULES  # the walk goes into the sub-packages
    others = {m: container_calls(m) for m in MODULES if m != "core.engine"}
    assert {m: lines for m, lines in others.items() if lines} == {}
    assert container_calls("core.engine")  # the walk does see them where they are
