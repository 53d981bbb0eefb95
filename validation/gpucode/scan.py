"""A tree -> its payload manifest: every piece of GPU code, by arch, by owner (distribution or folder) and family,
what sits in a folder named for another arch, and every file that could not be read (listed, never guessed).

Paths are shown as they are inside the image (`shown` strips a test or export root). Hard links are read once;
symlinks are not followed (a loop is listed as unknown); only regular files are opened.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validation.gpucode import SCHEMA
from validation.gpucode.elf import Malformed
from validation.gpucode.read import Piece, name_arch, read

SITE_DIRS = ("site-packages", "dist-packages")
# Families of kernels an image ships whose arch coverage is checked as a whole (cleanbuild's audit, validation).
AITER_ASM = "aiter assembly kernels"
AITER_MODULES = "aiter prebuilt modules"
TRITON_CACHE = "Triton cache"  # compiled ahead by the warm step (validation.warmcache): /opt/atom-build/triton-cache
TRITON_CACHE_DIR = "/triton-cache/"
OURS = ("/opt/venv", "/opt/atom-build")  # what the clean image's own layers write; the rest is the base image's


@dataclass(frozen=True)
class Found:
    path: str  # shown
    piece: Piece
    owner: str
    family: str
    folder_arch: str | None  # the arch the folder it sits in is named for (aiter's hsa/<arch>/), if any
    ours: bool


@dataclass
class Scan:
    found: list[Found] = field(default_factory=list)
    unknown: list[dict[str, str]] = field(default_factory=list)
    files_read: int = 0
    seconds: float = 0.0


def scan(roots: Iterable[Path], *, root: Path = Path("/"), ours: tuple[str, ...] = OURS) -> Scan:
    """Read every regular file under each root (absolute paths under `root`, the tree's /)."""
    start, out, seen = time.monotonic(), Scan(), set()
    owners = Owners(root)
    for top in roots:
        for path, st in _files(top, out, root):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            out.files_read += 1
            _read_one(path, st.st_size, out, owners, root, ours)
    out.seconds = round(time.monotonic() - start, 2)
    return out


def _read_one(path: str, size: int, out: Scan, owners: Owners, root: Path, ours: tuple[str, ...]) -> None:
    try:
        pieces = read(path, size)
    except Malformed as exc:
        out.unknown.append({"path": shown(Path(path), root), "why": str(exc)})
        return
    except OSError as exc:
        out.unknown.append({"path": shown(Path(path), root), "why": _os_why(exc)})
        return
    if not pieces:
        return
    file = Path(path)  # only here: most files hold no GPU code, and a tree can hold 30,000 of them
    where = shown(file, root)
    owner, arch = owners.of(file), folder_arch(where)
    for piece in pieces:
        out.found.append(Found(where, piece, owner, family(where, owner), arch,
                               any(where == p or where.startswith(p + "/") for p in ours)))


def _files(top: Path, out: Scan, root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files under top with their stat, symlinks not followed; a symlink loop and an unreadable folder
    are listed."""
    def failed(exc: OSError) -> None:
        out.unknown.append({"path": shown(Path(exc.filename or top), root), "why": _os_why(exc)})

    if top.is_file() and not top.is_symlink():
        st = _regular(str(top), out, root)
        if st is not None:
            yield str(top), st
        return
    for folder, dirs, files in os.walk(top, onerror=failed):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            st = _regular(path, out, root)
            if st is not None:
                yield path, st


def _regular(path: str, out: Scan, root: Path) -> os.stat_result | None:
    """path's stat when it is a regular file, else None; a symlink loop or a failed stat is listed. One lstat a
    file: a tree can hold 30,000 files, most of them no GPU code."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        out.unknown.append({"path": shown(Path(path), root), "why": _os_why(exc)})
        return None
    if stat.S_ISLNK(st.st_mode):
        _check_link(Path(path), out, root)
    return st if stat.S_ISREG(st.st_mode) else None


def _check_link(path: Path, out: Scan, root: Path) -> None:
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            out.unknown.append({"path": shown(path, root), "why": "symlink loop"})


def _os_why(exc: OSError) -> str:
    return f"unreadable: {exc.strerror or exc}"


def shown(path: Path, root: Path) -> str:
    text, top = str(path), str(root)
    if top == "/":
        return text
    if text.startswith(top + "/"):  # what relative_to gives, without pathlib's parsing (once a file read)
        return text[len(top):]
    try:
        return "/" + str(path.relative_to(root))
    except ValueError:
        return str(path)


def folder_arch(path: str) -> str | None:
    """The arch a folder on the path is named for exactly (aiter's hsa/gfx942/...), nearest first."""
    for part in reversed(path.split("/")[:-1]):
        arch = name_arch(part)
        if arch and part == arch:
            return arch
    return None


def family(path: str, owner: str) -> str:
    if "/aiter_meta/hsa/" in path or "/aiter/hsa/" in path:
        return AITER_ASM
    if TRITON_CACHE_DIR in path:
        return TRITON_CACHE
    if path.endswith(".so") and ("/aiter/jit/" in path or "/aiter_meta/" in path or "/.aiter/" in path):
        return AITER_MODULES
    return owner


class Owners:
    """Which distribution (site-packages: from the RECORD files) or folder a file belongs to."""

    def __init__(self, root: Path):
        self.root = root
        self._by_site: dict[Path, dict[str, str]] = {}
        self._by_folder: dict[str, str] = {}

    def of(self, path: Path) -> str:
        """Every file of a folder below a site's top level has that folder's owner: asked once a folder."""
        folder = os.path.dirname(path)
        owner = self._by_folder.get(folder)
        if owner is None:
            parts = path.parts
            site_at = next((i for i, p in enumerate(parts) if p in SITE_DIRS), None)
            owner = self._of(path, parts, site_at)
            if site_at is None or site_at + 2 < len(parts):  # not a file at a site's top (whose own name counts)
                self._by_folder[folder] = owner
        return owner

    def _of(self, path: Path, parts: tuple[str, ...], site_at: int | None) -> str:
        if site_at is None or site_at + 1 >= len(parts):
            return _folder(shown(path, self.root))
        site = Path(*parts[:site_at + 1])
        tops = self._by_site.get(site)
        if tops is None:
            tops = self._by_site[site] = _top_levels(site)
        top = parts[site_at + 1]
        return tops.get(top, top)


def _folder(path: str) -> str:
    """Outside site-packages: a kernel library's folder (…/lib/rocblas), else the folder above any folder named for
    an arch (…/hsa for …/hsa/gfx942/fmoe/x.co), else the first three levels (/opt/rocm-7.2.0/lib)."""
    parts = path.split("/")[:-1]
    for i, part in enumerate(parts):
        if part.lower() in ("rocblas", "hipblaslt", "hipsparselt", "miopen"):
            return "/".join(parts[:i + 1])
        if name_arch(part) == part:
            return "/".join(parts[:i]) or "/"
    return "/".join(parts[:4]) or "/"


def _top_levels(site: Path) -> dict[str, str]:
    """top-level name in site-packages -> the distribution whose RECORD lists files under it."""
    out: dict[str, str] = {}
    for info in sorted(site.glob("*.dist-info")):
        name = info.name[:-len(".dist-info")].rsplit("-", 1)[0]
        try:
            lines = (info / "RECORD").read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            top = line.split(",", 1)[0].split("/", 1)[0]
            if top and not top.endswith(".dist-info") and top != "..":
                out.setdefault(top, name)
    return out


def manifest(result: Scan, *, target: str | None, roots: list[str]) -> dict[str, Any]:
    """The JSON manifest: per arch (files, bytes, by owner), per family, misplaced, unknown. No clock in it: the
    clean image carries one, and the same tree must give the same bytes (Scan.seconds says how long it took)."""
    archs: dict[str, dict[str, Any]] = {}
    families: dict[str, dict[str, dict[str, int]]] = {}
    for f in result.found:
        a = archs.setdefault(f.piece.arch, {"files": 0, "bytes": 0, "named_only_files": 0, "named_only_bytes": 0,
                                            "ours_bytes": 0, "base_bytes": 0, "owners": {}})
        kind = "named_only_" if f.piece.how == "named" else ""
        a[kind + "files"] += 1
        a[kind + "bytes"] += f.piece.size
        a["ours_bytes" if f.ours else "base_bytes"] += f.piece.size
        _add(a["owners"].setdefault(f.owner, {"files": 0, "bytes": 0}), f.piece.size)
        _add(families.setdefault(f.family, {}).setdefault(f.piece.arch, {"files": 0, "bytes": 0}), f.piece.size)
    misplaced = [{"path": f.path, "folder_arch": f.folder_arch, "arch": f.piece.arch} for f in result.found
                 if f.folder_arch and f.piece.how != "named" and f.folder_arch != f.piece.arch]
    return {"schema": SCHEMA, "target": target, "roots": roots, "archs": dict(sorted(archs.items())),
            "families": {k: dict(sorted(v.items())) for k, v in sorted(families.items())},
            "misplaced": misplaced, "unknown": result.unknown, "files_read": result.files_read}


def _add(counter: dict[str, int], size: int) -> None:
    counter["files"] += 1
    counter["bytes"] += size
