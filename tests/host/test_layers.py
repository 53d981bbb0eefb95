"""The host package's layers, read from its source (ast), transitively: the Docker boundary (engine, buildx) does
not depend on the planner, and the report does not call the engine. Function-level imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cleanbuild"


def direct_imports(module: str) -> set[str]:
    """The cleanbuild modules one module imports anywhere in its source (module level or inside a function)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # from . import x / from .x import y
            found |= {a.name for a in node.names} if node.module is None else {node.module.split(".")[0]}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("cleanbuild."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("cleanbuild.")}
    return {m for m in found if (PACKAGE / f"{m}.py").is_file()}


def reached(module: str) -> set[str]:
    """Every cleanbuild module that importing `module` can import, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for name in direct_imports(todo.pop()) - seen:
            seen.add(name)
            todo.append(name)
    return seen


@pytest.mark.parametrize(("module", "below"), [
    ("engine", "plan"), ("buildx", "plan"), ("report", "engine"), ("spec", "plan"), ("record", "engine"),
])
def test_a_lower_layer_never_reaches_a_higher_one(module, below):
    assert below not in reached(module)


def test_the_walk_sees_relative_and_function_level_imports():
    assert {"plan", "engine", "report"} <= reached("steps")
    assert "gpu" in direct_imports("audit")  # imported inside a function


def test_the_shared_types_live_in_the_foundation():
    assert "spec" in direct_imports("engine") and "spec" in direct_imports("buildx")


def container_calls(module: str) -> list[int]:
    """Lines where a module calls `<client>.containers.run(...)` or `.create(...)`: starts or makes a container."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("run", "create")
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "containers"]


def test_only_the_engine_creates_containers():
    others = {p.stem: container_calls(p.stem) for p in PACKAGE.glob("*.py") if p.stem != "engine"}
    assert {m: lines for m, lines in others.items() if lines} == {}
    assert container_calls("engine")  # the walk does see them where they are
