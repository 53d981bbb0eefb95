"""One file -> the GPU code in it, from its bytes: an AMDGPU code object, the bundles in a shared object's
`.hip_fatbin`, a bare bundle, or a kernel-library data file named per arch (named-only). Headers and sections only.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from validation.gpucode.bundle import CCOB, MAGIC, Bundle, read_bundle
from validation.gpucode.elf import (
    EM_AMDGPU,
    MACH,
    AmdgpuTarget,
    Malformed,
    amdgpu_target,
    parse_header,
    sections,
)

HEAD = 64
FATBIN_SECTIONS = (".hip_fatbin",)  # .hipFatBinSegment is only the runtime's 24-byte wrapper pointing at it
MAX_BUNDLES = 4096  # per section: one per translation unit
# Kernel libraries whose data files say their arch only in their names (Tensile's .dat, MIOpen's .kdb/.fdb).
KERNEL_LIBRARIES = frozenset({"rocblas", "hipblaslt", "hipsparselt", "miopen", "tensile"})
ARCH_TOKEN = re.compile(r"gfx[0-9][0-9a-f]{1,4}")
ARCH_NAMES = sorted((n for n in MACH.values() if "generic" not in n), key=len, reverse=True)


@dataclass(frozen=True)
class Piece:
    """One piece of GPU code: a code object (a file, or a bundle entry inside one), or a named-only data file."""

    arch: str  # from the bytes (a code object's e_flags), or from the name (how == "named")
    target: str  # the full target ID (gfx942:xnack+), or the arch for named-only
    size: int  # the code object's bytes (a bundle entry's, uncompressed), or the named file's
    how: str  # "code-object", "bundle", "named"
    code_object: int | None = None
    compression: str | None = None  # a CCOB bundle's method


def read(path: Path | str, size: int) -> list[Piece]:
    """The pieces in one regular file; [] when it holds no GPU code; Malformed (one line) when it claims a format
    and breaks it; OSError when it cannot be read. A str path is read as it is (a scan opens 30,000 files, most of
    them no GPU code: no pathlib object for those)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD)
        header = parse_header(head)
        if header is not None:
            if header.machine == EM_AMDGPU:
                return [_code_object(amdgpu_target(header), size)]
            found = sections(fh, header, size)
            return [p for name in FATBIN_SECTIONS if name in found for p in _fatbin(fh, *found[name], size)]
        if head.startswith(MAGIC) or head.startswith(CCOB):
            return _pieces(read_bundle(fh, 0, size))
    return _named(path, size)


def _code_object(target: AmdgpuTarget, size: int) -> Piece:
    return Piece(target.arch or target.name, target.name, size, "code-object", target.code_object)


def _fatbin(fh: BinaryIO, offset: int, length: int, file_size: int) -> list[Piece]:
    """Every bundle in a fat binary section: bundles follow each other, each aligned (4096 by clang)."""
    if offset + length > file_size:
        raise Malformed(f"the fat binary section ({length} bytes at {offset}) runs past the end of the file")
    pieces: list[Piece] = []
    at = 0
    for _ in range(MAX_BUNDLES):
        at = _next_magic(fh, offset + at, offset + length)
        if at < 0:
            return pieces
        bundle = read_bundle(fh, at, offset + length - at)
        pieces += _pieces(bundle)
        at = at - offset + max(bundle.stored, 1)
    raise Malformed(f"more than {MAX_BUNDLES} bundles in one fat binary section")


def _next_magic(fh: BinaryIO, start: int, end: int) -> int:
    """The file offset of the next bundle magic at or after start (at most 8 KiB on: bundles are page-aligned)."""
    fh.seek(start)
    window = fh.read(min(8192 + len(MAGIC), end - start))
    hits = [i for i in (window.find(MAGIC), window.find(CCOB)) if i >= 0]
    return start + min(hits) if hits else -1


def _pieces(bundle: Bundle) -> list[Piece]:
    out = []
    for e in bundle.entries:
        if e.target is None:
            continue  # the host entry (empty) and non-GPU entries
        if e.triple_arch and e.target.arch and e.triple_arch != e.target.arch:
            raise Malformed(f"bundle entry {e.triple} holds a code object for {e.target.arch}")
        out.append(Piece(e.target.arch or e.target.name, e.target.name, e.size, "bundle", e.target.code_object,
                         bundle.compression))
    return out


def _named(path: Path | str, size: int) -> list[Piece]:
    """A kernel library's data file, by the arch in its name: counted, marked named-only."""
    parts = os.fspath(path).split(os.sep)
    if not KERNEL_LIBRARIES & {p.lower() for p in parts}:
        return []
    arch = name_arch(parts[-1])
    return [Piece(arch, arch, size, "named")] if arch else []


def name_arch(name: str) -> str | None:
    """The arch a file or folder name carries (gfx942 in TensileLibrary_gfx942.dat, gfx90a in gfx90a68.kdb)."""
    token = ARCH_TOKEN.search(name)
    return _token_arch(token.group()) if token else None


@functools.cache
def _token_arch(token: str) -> str | None:
    """The longest arch name a gfx token starts with; a tree holds few tokens and thousands of names carrying one."""
    return next((a for a in ARCH_NAMES if token.startswith(a)), None)


def file_size(path: Path) -> int:
    return os.stat(path).st_size
