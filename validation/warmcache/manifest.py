"""What a Triton cache folder holds, read from its files, and the manifest the image keeps beside it.

A kernel in Triton's cache is a folder (its key, base32) holding `__grp__<name>.json` (which files make it up),
`<name>.json` (its metadata: target, options) and its code object: `<name>.hsaco` for HIP, whose arch is read from
its bytes (AMDGPU ELF e_flags, validation.gpucode), or `<name>.cubin` for CUDA (its arch from the metadata).
Triton's C modules (the HIP/CUDA driver utilities and one launcher per kernel signature) are `<name>.so` folders.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from validation.gpucode.elf import Malformed
from validation.gpucode.read import read

SCHEMA = 1
CODE = (".hsaco", ".cubin")


def read_cache(folder: Path) -> dict[str, Any]:
    """{kernels: [{name, key, arch, bytes}], by_arch: {arch: {files, bytes}}, stubs: [names], bytes: total}."""
    kernels, stubs, total = [], [], 0
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not entry.is_dir():
            continue
        for file in sorted(entry.iterdir()):
            size = file.stat().st_size
            total += size
            if file.suffix in CODE:
                kernels.append({"name": file.stem, "key": entry.name, "arch": _arch(file, size), "bytes": size})
            elif file.suffix == ".so":
                stubs.append(file.name)
    by_arch: dict[str, dict[str, int]] = {}
    for k in kernels:
        row = by_arch.setdefault(k["arch"], {"files": 0, "bytes": 0})
        row["files"] += 1
        row["bytes"] += k["bytes"]
    return {"kernels": kernels, "by_arch": dict(sorted(by_arch.items())), "stubs": sorted(stubs), "bytes": total}


def _arch(code: Path, size: int) -> str:
    if code.suffix == ".hsaco":
        try:
            pieces = read(code, size)
        except (Malformed, OSError):
            pieces = []
        return pieces[0].arch if pieces else "unknown"
    try:
        target = json.loads(code.with_suffix(".json").read_text()).get("target", {})
    except (OSError, ValueError):
        return "unknown"
    arch = target.get("arch") if isinstance(target, dict) else None
    return f"sm_{arch}" if arch is not None else "unknown"


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"schema": SCHEMA, **data}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def open_to_all(folder: Path) -> None:
    """Every user the container runs as reads the cache and adds to it (a kernel the plan missed is compiled into a
    new key folder): files 0644, folders 0755, the top 1777 like /tmp (aiter#4800: a cache made by root that no
    other user could use)."""
    for top, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(top, name), 0o755)
        for name in files:
            os.chmod(os.path.join(top, name), 0o644)
    os.chmod(folder, 0o1777)
