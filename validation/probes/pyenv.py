"""The image's Python as data: installed distributions, where a package lives, who owns which file.

Only importlib.metadata and import specs: no package is imported. Distributions are looked up on the context's
sys.path (every site-packages, .pth-added folders included); a folder listed twice is read once.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.metadata as md
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from validation.probes.image import Image


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    base: Path  # the folder its RECORD paths are relative to (site-packages)
    meta_dir: str  # the .dist-info / .egg-info folder, or "" when unknown
    files: tuple[str, ...] | None  # RECORD (or installed-files.txt) paths; None when the dist lists none
    requires: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def key(self) -> str:
        return normalize(self.name)


@dataclass(frozen=True)
class Location:
    name: str
    path: Path  # the package folder (…/site-packages/aiter)
    how: str  # which lookup found it
    dist: Dist | None  # the distribution whose RECORD lists its __init__.py

    @property
    def root(self) -> Path:
        """The folder that holds the package: the --root the patches package expects."""
        return self.path.parent


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(ctx: Image) -> list[Dist]:
    """Every distribution on sys.path, in sys.path order (the first of a name is the one Python imports)."""
    if "dists" not in ctx.cache:
        seen: set[str] = set()
        found = []
        for dist in md.distributions(path=_unique(ctx.sys_path)):
            meta_dir = str(getattr(dist, "_path", ""))  # PathDistribution keeps its folder here
            if meta_dir and meta_dir in seen:
                continue
            seen.add(meta_dir)
            found.append(_to_dist(dist, meta_dir))
        ctx.cache["dists"] = [d for d in found if d is not None]
    return ctx.cache["dists"]


def _unique(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        real = os.path.realpath(p or ".")
        if real not in out:
            out.append(real)
    return out


def _to_dist(dist: md.Distribution, meta_dir: str) -> Dist | None:
    try:
        name = dist.metadata["Name"]
        if not name:
            return None
        # RECORD or installed-files.txt list installed paths; an egg-info's SOURCES.txt lists a source tree's.
        installed = dist.read_text("RECORD") is not None or dist.read_text("installed-files.txt") is not None
        files = dist.files if installed else None
        return Dist(name=name, version=dist.version or "?", base=Path(dist.locate_file("")),
                    meta_dir=meta_dir, files=tuple(str(f) for f in files) if files is not None else None,
                    requires=tuple(dist.requires or ()))
    except (OSError, ValueError, KeyError):
        return None


def by_name(ctx: Image) -> dict[str, list[Dist]]:
    table: dict[str, list[Dist]] = {}
    for dist in distributions(ctx):
        table.setdefault(dist.key, []).append(dist)
    return table


def dist_version(ctx: Image, *names: str) -> str | None:
    table = by_name(ctx)
    for name in names:
        if normalize(name) in table:
            return table[normalize(name)][0].version
    return None


def owners(ctx: Image) -> dict[str, list[Dist]]:
    """Absolute file path -> the distributions whose RECORD lists it (dist-info folders left out)."""
    if "owners" not in ctx.cache:
        table: dict[str, list[Dist]] = {}
        for dist in distributions(ctx):
            for rel in dist.files or ():
                head = rel.replace("\\", "/").split("/", 1)[0]
                if head.endswith((".dist-info", ".egg-info")):
                    continue
                path = os.path.normpath(os.path.join(dist.base, rel))
                if dist not in table.setdefault(path, []):
                    table[path].append(dist)
        ctx.cache["owners"] = table
    return ctx.cache["owners"]


def aiter(ctx: Image, evidence: list[str]) -> Location | None:
    """The image's aiter, or None with "not found" said in evidence (a probe that needs it then stops)."""
    found = locate(ctx, "aiter")
    if found is None:
        evidence.append("aiter not found in this image's Python")
    return found


def locate(ctx: Image, name: str) -> Location | None:
    """A top-level package's folder: by import spec (never executing it), else by RECORD, else by sys.path."""
    key = f"locate:{name}"
    if key not in ctx.cache:
        ctx.cache[key] = _spec_location(ctx, name) or _record_location(ctx, name) or _path_location(ctx, name)
    return ctx.cache[key]


def _spec_location(ctx: Image, name: str) -> Location | None:
    try:
        if ctx.meta_path:
            spec, how = importlib.util.find_spec(name), "importlib.util.find_spec"
        else:
            spec, how = importlib.machinery.PathFinder.find_spec(name, ctx.sys_path), "import path finder"
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        return None
    path = Path(locations[0])
    return Location(name, path, how, owner_of(ctx, path / "__init__.py"))


def _record_location(ctx: Image, name: str) -> Location | None:
    for dist in distributions(ctx):
        if f"{name}/__init__.py" in (dist.files or ()):
            return Location(name, dist.base / name, f"RECORD of {dist.label}", dist)
    return None


def _path_location(ctx: Image, name: str) -> Location | None:
    for entry in ctx.sys_path:
        folder = Path(entry or ".") / name
        if (folder / "__init__.py").is_file():
            return Location(name, folder, f"sys.path entry {entry}", owner_of(ctx, folder / "__init__.py"))
    return None


def owner_of(ctx: Image, file: Path) -> Dist | None:
    found = owners(ctx).get(os.path.realpath(file))
    return found[0] if found else None


def module_constants(file: Path, names: tuple[str, ...]) -> dict[str, object]:
    """Module-level `NAME = <literal>` assignments of a source file, read with ast (never executed)."""
    try:
        tree = ast.parse(file.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    try:
                        out[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        continue
    return out


def torch_build(ctx: Image) -> dict[str, object]:
    """torch's version, and whether it is a HIP (ROCm) or CUDA build, from torch/version.py."""
    where = locate(ctx, "torch")
    if where is None:
        return {}
    facts = module_constants(where.path / "version.py", ("__version__", "hip", "cuda", "git_version"))
    return {"path": ctx.shown(where.path), **facts}
