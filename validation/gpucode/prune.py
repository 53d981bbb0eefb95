"""Leave out another arch's code where the code is keyed by arch and the runtime reads only its own arch's folder.

aiter's assembly kernels: `aiter_meta/hsa/<arch>/...`, loaded as AITER_ASM_DIR + "/" + get_gpu_arch() + "/" + name
(aiter 79366eb8, csrc/include/aiter_hip_common.h load_hsaco_file); hsa/codegen.py, which a JIT build of fmha_v3_bwd
runs, keeps only rows whose arch is in AITER_GPU_ARCHS. So a one-arch image needs only its own folder. What is left
out is read first (the arch of each code object from its bytes), listed, and removed from the distribution's RECORD
so the installer's view of the venv stays true.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from validation.gpucode.read import name_arch
from validation.gpucode.scan import Scan, scan

ARCH_KEYED = ("aiter_meta/hsa",)  # relative to site-packages


class PruneError(Exception):
    """A one-line reason the clean step must stop."""


def prune(site: Path, target: str) -> dict:
    """Remove every other arch's folder under each arch-keyed root in site; the record of what was left out."""
    record: dict = {"target": target, "roots": [], "left_out": [], "left_out_by_arch": {}, "kept_by_arch": {}}
    for rel in ARCH_KEYED:
        folder = site / rel
        if not folder.is_dir():
            continue
        arch_dirs = {p.name: p for p in sorted(folder.iterdir()) if p.is_dir() and name_arch(p.name) == p.name}
        if not arch_dirs:
            continue
        if target not in arch_dirs:
            raise PruneError(f"{rel} holds kernels for {', '.join(arch_dirs)} but none for {target}: an image built "
                             f"for {target} would have no assembly kernels. To fix, build aiter from a commit that "
                             f"ships hsa/{target}/ or choose one of those archs")
        record["roots"].append(rel)
        _count(scan([arch_dirs[target]], root=site, ours=()), record["kept_by_arch"])
        for name, path in arch_dirs.items():
            if name != target:
                gone = scan([path], root=site, ours=())
                record["left_out"] += [{"path": f.path.lstrip("/"), "arch": f.piece.arch, "bytes": f.piece.size}
                                       for f in gone.found]
                _count(gone, record["left_out_by_arch"])
                shutil.rmtree(path)
        _drop_from_records(site, [f"{rel}/{n}/" for n in arch_dirs if n != target])
    return record


def _count(result: Scan, into: dict) -> None:
    for f in result.found:
        counter = into.setdefault(f.piece.arch, {"files": 0, "bytes": 0})
        counter["files"] += 1
        counter["bytes"] += f.piece.size


def _drop_from_records(site: Path, prefixes: list[str]) -> None:
    """Remove the RECORD rows of removed files, in every distribution that lists them."""
    for record in sorted(site.glob("*.dist-info/RECORD")):
        lines = record.read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.startswith(tuple(prefixes))]
        if len(kept) != len(lines):
            record.write_text("".join(kept))
