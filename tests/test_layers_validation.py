"""The image side's layers: validation/'s folders, in the order docs/architecture.md writes once ("## Image-side
layers"), checked on its real import graph as tests/test_layers.py checks the host's (read with ast, imports inside
functions included): no module imports from a floor above its own or from a peer folder on its floor, no module
takes part in an import cycle, the root holds the programs only and at most 8 modules, and no two modules or classes
share a name. Plus the edges between the sides, exactly as the document lists them. Modules are named by their
dotted path under their package: "core.archs", "checks" (checks/__init__.py), "cli" (a module of the root)."""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.support.imports import closure

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cleanbuild", "validation", "patches")


def section(title: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def layer_order() -> list[tuple[str, ...]]:
    """The floors, lowest first: "1. `core`: ..."; the last names the root's modules."""
    return [tuple(re.findall(r"`(\w+)`", line.split(":", 1)[0])) for line in section("Image-side layers").splitlines()
            if re.match(r"\d+\. `", line)]


def written_edges() -> dict[str, set[str]]:
    """"- host -> validation: `core.metadata`, ..." -> {"cleanbuild->validation": {"core.metadata", ...}}."""
    side = {"host": "cleanbuild", "validation": "validation", "patches": "patches"}
    edges = {}
    for line in re.findall(r"^- (\w+ -> \w+: .*(?:\n  .*)*)", section("Image-side layers"), re.M):
        head, names = line.split(":", 1)
        source, target = (side[s.strip()] for s in head.split("->"))
        edges[f"{source}->{target}"] = {n for n in re.findall(r"`([\w.]+)`", names) if not n.startswith(target)}
    return edges


def modules(package: str) -> list[str]:
    """Every module of a package by its dotted path under it; a sub-package's __init__.py by the sub-package's name."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT / package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found.append(".".join(parts))
    return found


def source(package: str, module: str) -> Path:
    folder = ROOT / package / module.replace(".", "/")
    return folder / "__init__.py" if (folder / "__init__.py").is_file() else folder.with_suffix(".py")


@functools.cache
def direct_imports(package: str, module: str) -> frozenset[tuple[str, str]]:
    """(package, module) pairs one module imports anywhere in its source; `from pkg import submodule` is an edge to
    the submodule only (its package's __init__ is already running), `from pkg import NAME` one to the package."""
    tree = ast.parse(source(package, module).read_text())
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in PACKAGES:
            top, *base = node.module.split(".")
            for alias in node.names:
                sub = ".".join([*base, alias.name])
                found.add((top, sub) if source(top, sub).is_file() else (top, ".".join(base)))
        elif isinstance(node, ast.Import):
            found |= {(a.name.split(".")[0], ".".join(a.name.split(".")[1:])) for a in node.names
                      if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{package}.{module}: a relative import (this repository writes them absolute)")
    return frozenset((top, m) for top, m in found if m and source(top, m).is_file())


def imports_within(module: str) -> set[str]:
    return {m for top, m in direct_imports("validation", module) if top == "validation"}


LAYERS = layer_order()
ROOT_MODULES = LAYERS[-1] if LAYERS else ()
RANK = {name: floor for floor, names in enumerate(LAYERS) for name in names}
MODULES = modules("validation")


def folder(module: str) -> str:
    """A module's folder: its sub-package, or "" for a module of the package root."""
    first = module.split(".")[0]
    return first if (ROOT / "validation" / first).is_dir() else ""


def rank(module: str) -> int:
    return RANK[folder(module) or module]


def reached(module: str) -> set[str]:
    return closure(module, imports_within)


def test_the_order_is_written_once_and_names_every_folder_and_every_program():
    assert LAYERS[0] == ("core",)
    subpackages = {p.parent.name for p in (ROOT / "validation").glob("*/__init__.py")}
    programs = {p.stem for p in (ROOT / "validation").glob("*.py")} - {"__init__"}
    assert (set(RANK) - set(ROOT_MODULES), set(ROOT_MODULES)) == (subpackages, programs)


def test_the_root_holds_at_most_eight_modules():
    assert len(list((ROOT / "validation").glob("*.py"))) <= 8


def test_no_module_imports_from_above_its_floor_or_from_a_peer():
    wrong = {module: sorted(other for other in imports_within(module)
                            if rank(other) > rank(module) or (rank(other) == rank(module)
                                                              and folder(other) != folder(module)))
             for module in MODULES}
    assert {m: others for m, others in wrong.items() if others} == {}


def test_no_import_cycle():
    assert [m for m in MODULES if m in reached(m)] == []


@pytest.mark.parametrize("module", [m for m in MODULES if folder(m) == "core"])
def test_the_foundation_reaches_nothing_above_it(module):
    assert {m for m in reached(module) if folder(m) != "core"} == set()


def test_the_walk_sees_function_level_imports_and_the_root():
    assert "warmcache.prove" in imports_within("checks.first_use_compile")  # imported inside run()
    assert "probes.runner" in imports_within("audit")  # inside main()
    assert "checks" in imports_within("cli")  # `from validation.checks import CHECKS`: the package's __init__
    assert "cli" in imports_within("__main__")
    assert "core.archs" in reached("payload")


def test_no_two_modules_share_a_name():
    """Across the whole package: module names, and the sub-packages' own names (kernels/ beside a kernels.py was
    one); __init__ and __main__ are Python's."""
    names = [m.split(".")[-1] for m in MODULES if m != "__main__"]
    assert sorted(n for n, count in Counter(names).items() if count > 1) == []


def test_no_two_classes_share_a_name():
    classes = [(node.name, m) for m in MODULES for node in ast.walk(ast.parse(source("validation", m).read_text()))
               if isinstance(node, ast.ClassDef)]
    counts = Counter(name for name, _ in classes)
    assert sorted((name, m) for name, m in classes if counts[name] > 1) == []


def importers(package: str, target: str) -> set[str]:
    return {m for m in modules(package) if any(top == target for top, _ in direct_imports(package, m))}


def test_the_edges_between_the_sides_are_the_ones_written():
    edges = written_edges()
    assert set(edges) == {"cleanbuild->validation", "cleanbuild->patches", "validation->patches"}
    assert {key: importers(*key.split("->")) for key in edges} == edges


@pytest.mark.parametrize(("package", "target"), [("validation", "cleanbuild"), ("patches", "cleanbuild"),
                                                  ("patches", "validation")])
def test_the_image_side_never_imports_upward(package, target):
    assert importers(package, target) == set()


def test_what_the_host_imports_of_validation_is_standard_library_only():
    """The host has no torch: the validation modules it reaches import none of torch, numpy, triton at any level."""
    reached_by_host = set()
    for module in importers("cleanbuild", "validation"):
        for top, target in direct_imports("cleanbuild", module):
            if top == "validation":
                reached_by_host |= {target} | reached(target)
    heavy = {m for m in reached_by_host
             for node in ast.walk(ast.parse(source("validation", m).read_text()))
             if isinstance(node, ast.Import | ast.ImportFrom)
             and {(a.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] for a in node.names}
             & {"torch", "numpy", "triton"}}
    assert "core.archs" in reached_by_host and heavy == set()


def test_the_tests_mirror_the_folders():
    tests = ROOT / "tests" / "validation"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__")}
    assert folders == set(RANK) - set(ROOT_MODULES)
