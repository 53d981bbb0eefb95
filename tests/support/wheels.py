"""Tiny wheels written with zipfile: a .dist-info with METADATA, WHEEL and RECORD, plus the files given."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes] | None = None,
               requires: tuple[str, ...] = (), tag: str = "py3-none-any") -> Path:
    """folder/<name>-<version>-<tag>.whl installing `files` (default: <name>/__init__.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                        *(f"Requires-Dist: {r}\n" for r in requires)])
    content = dict(files if files is not None else {f"{dist}/__init__.py": b""})
    content[f"{info}/METADATA"] = metadata.encode()
    content[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in content.items())
    content[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in content.items():
            zf.writestr(member, data)
    return path


def pip_download(requirement: str, cache: Path) -> subprocess.CompletedProcess:
    """`pip download --no-deps REQUIREMENT` into cache, each file put in place by one rename: a test on another
    worker that globs the cache sees a whole wheel or none, and two that download at once both end with it."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as staging:  # beside the files: a rename
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", requirement,  # noqa: S603
                               "-d", staging], capture_output=True, text=True, timeout=600, check=False)
        for file in Path(staging).iterdir():
            os.replace(file, cache / file.name)
    return proc
