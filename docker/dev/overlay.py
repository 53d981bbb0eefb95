"""Apply a developer's changed files to the image's site-packages (Dockerfile.dev). Standard library only.

    python overlay.py CONTEXT

CONTEXT/manifest.json: {"files": [[path, blob sha], ...], "deleted": [path, ...], "sources": {...}}; the files
are under CONTEXT/files/<path>, where path is relative to site-packages (aiter/tuned_gemm.py). Each copied file is
checked against its git blob SHA, its stale bytecode removed and a .py compiled again (the image sets
PYTHONDONTWRITEBYTECODE); a deleted file goes with its bytecode. The manifest is kept as /opt/atom-build/dev.json.
"""

from __future__ import annotations

import hashlib
import json
import py_compile
import shutil
import sys
import sysconfig
from pathlib import Path

RECORD = Path("/opt/atom-build/dev.json")


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def drop_bytecode(target: Path) -> None:
    cache = target.parent / "__pycache__"
    for stale in cache.glob(f"{target.stem}.*.pyc") if target.suffix == ".py" else ():
        stale.unlink()


def main(context: Path) -> int:
    manifest = json.loads((context / "manifest.json").read_text())
    site = Path(sysconfig.get_paths()["purelib"])
    for rel in manifest["deleted"]:
        target = site / rel
        target.unlink(missing_ok=True)
        drop_bytecode(target)
    for rel, blob in manifest["files"]:
        data = (context / "files" / rel).read_bytes()
        if blob_sha(data) != blob:
            print(f"overlay: {rel} is not the file the plan read (blob {blob}). To fix, run the build again.",
                  file=sys.stderr)
            return 1
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(context / "files" / rel, target)
        drop_bytecode(target)
        if target.suffix == ".py":
            py_compile.compile(str(target), doraise=False, quiet=1)
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"overlay: {len(manifest['files'])} files copied, {len(manifest['deleted'])} deleted under {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
