"""wheel_add_tree.py WHEEL SRC DEST: add the folder SRC to WHEEL under DEST/, with RECORD rows, byte-reproducibly.

The offline profile's stand-in for aiter's non-Triton-only install path: aiter's setup.py copies hsa/ into
aiter_meta/hsa unless AITER_TRITON_ONLY=1 (aiter 79366eb8, setup.py prepare_packaging), and that path needs ROCm at
import. So the Triton-only wheel gets the same folder here, as setup.py would have placed it. Every entry keeps its
bytes; new entries are sorted, dated SOURCE_DATE_EPOCH (or 1980) and 0644; RECORD is rewritten last.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import time
import zipfile
from pathlib import Path


def record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def add_tree(wheel: Path, src: Path, dest: str) -> int:
    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    stamp = time.gmtime(epoch)[:6]
    tmp = wheel.with_suffix(".tmp")
    added = sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink())
    with zipfile.ZipFile(wheel) as old, zipfile.ZipFile(tmp, "w") as new:
        record_name = next(n for n in old.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [r + "\n" for r in old.read(record_name).decode().splitlines() if r]
        taken = set(old.namelist())
        for info in old.infolist():
            if info.filename != record_name:
                new.writestr(info, old.read(info), compress_type=info.compress_type)
        for path in added:
            name = f"{dest}/{path.relative_to(src).as_posix()}"
            if name in taken:
                raise SystemExit(f"wheel_add_tree: {wheel.name} already has {name}")
            info = zipfile.ZipInfo(name, stamp)
            info.external_attr, info.compress_type = 0o100644 << 16, zipfile.ZIP_DEFLATED
            data = path.read_bytes()
            new.writestr(info, data)
            rows.append(record_row(name, data))
        info = zipfile.ZipInfo(record_name, stamp)
        info.external_attr, info.compress_type = 0o100644 << 16, zipfile.ZIP_DEFLATED
        new.writestr(info, "".join(sorted(rows, key=lambda r: r.startswith(record_name))))
    tmp.replace(wheel)
    return len(added)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: wheel_add_tree.py WHEEL SRC DEST", file=sys.stderr)
        return 2
    wheel, src, dest = Path(argv[0]), Path(argv[1]), argv[2].strip("/")
    count = add_tree(wheel, src, dest)
    print(f"wheel_add_tree: {count} files of {src} added to {wheel.name} under {dest}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
