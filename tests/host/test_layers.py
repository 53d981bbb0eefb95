"""The host package's layers, read from its source (ast), transitively: the foundation (the top-level modules
under the sub-packages) reaches no build or upstream module, upstream never reaches the build, the Docker boundary
(engine, images.buildx) does not depend on the planner, and the report does not call the engine. Function-level
imports count too. Modules are named by their dotted path under cleanbuild: "core.engine", "images.plan"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cleanbuild"
FOUNDATION = tuple(f"core.{p.stem}" for p in sorted((PACKAGE / "core").glob("*.py")) if p.stem != "__init__")


def source(module: str) -> Path:
    return PACKAGE / f"{module.replace('.', '/')}.py"


def direct_imports(module: str) -> set[str]:
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
    return {m for m in found if m and source(m).is_file()}


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
    ("core.engine", "images.plan"), ("images.buildx", "images.plan"), ("images.report", "core.engine"), ("core.spec", "images.plan"),
    ("images.record", "core.engine"),
])
def test_a_lower_layer_never_reaches_a_higher_one(module, below):
    assert below not in reached(module)


@pytest.mark.parametrize("module", FOUNDATION)
def test_the_foundation_reaches_no_build_or_upstream_module(module):
    assert {m for m in reached(module) if m.startswith(("images.", "upstream."))} == set()


@pytest.mark.parametrize("package", ["upstream", "gpuhost"])
def test_upstream_and_the_gpu_host_never_reach_the_build(package):
    modules = [f"{package}.{p.stem}" for p in (PACKAGE / package).glob("*.py") if p.stem != "__init__"]
    assert modules
    assert {m: sorted(r for r in reached(m) if r.startswith("images.")) for m in modules} == {m: [] for m in modules}


def test_the_walk_sees_relative_and_function_level_imports():
    assert {"images.plan", "core.engine", "images.report"} <= reached("images.steps")
    assert "gpuhost.gpu" in direct_imports("commands.audit_image")  # imported inside a function
    assert "upstream.pins" in direct_imports("commands.build")  # `from .upstream import pins as pinning`, in a function
    assert "core.errors" in direct_imports("images.plan")  # `from ..errors import UsageError`


def test_the_shared_types_live_in_the_foundation():
    assert "core.spec" in direct_imports("core.engine") and "core.spec" in direct_imports("images.buildx")


def container_calls(module: str) -> list[int]:
    """Lines where a module calls `<client>.containers.run(...)` or `.create(...)`: starts or makes a container."""
    tree = ast.parse(source(module).read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("run", "create")
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "containers"]


def test_only_the_engine_creates_containers():
    modules = [".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py")]
    assert "images.steps" in modules  # the walk goes into the sub-packages
    others = {m: container_calls(m) for m in modules if m != "core.engine"}
    assert {m: lines for m, lines in others.items() if lines} == {}
    assert container_calls("core.engine")  # the walk does see them where they are
