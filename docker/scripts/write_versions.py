"""Write /opt/atom-build/versions.json: what this image holds, read from the image itself (stdlib only).

Schema 2 (the host reads it with a strict reader, cleanbuild.core.metadata.ImageFacts):
  {"schema": 2, "arch", "ck_mode", "python", "rocm", "torch_hip",
   "packages": {component: version or null}, "sources": {"aiter"|"atom": {sha, date, describe, repo}},
   "lock_sha256", "manifest_sha256"}
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import platform
import sys
from pathlib import Path

SCHEMA = 2
# Component -> distribution names to try, first found wins.
DISTRIBUTIONS = {
    "torch": ["torch"], "torchvision": ["torchvision"], "torchaudio": ["torchaudio"],
    "triton": ["triton", "triton-rocm", "pytorch-triton-rocm"], "aiter": ["amd-aiter"], "atom": ["atom"],
    "flydsl": ["flydsl"], "mori": ["amd-mori-nightly", "amd-mori", "mori"], "transformers": ["transformers"],
}


def dist_version(names: list[str]) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def torch_hip() -> str | None:
    try:
        import torch  # noqa: PLC0415 - optional, only to read torch.version.hip
    except Exception:  # noqa: BLE001 - a broken torch must not stop the facts from being written
        return None
    return getattr(torch.version, "hip", None)


def rocm_version(info: Path = Path("/opt/rocm/.info/version")) -> str | None:
    return (info.read_text().strip() or None) if info.is_file() else None


def facts(arch: str, build_dir: Path) -> dict:
    manifest_path = build_dir / "manifest.json"
    raw = manifest_path.read_bytes()
    manifest = json.loads(raw)
    return {
        "schema": SCHEMA, "arch": arch, "ck_mode": os.environ.get("ATOM_BUILD_CK_MODE"),
        "python": platform.python_version(), "rocm": rocm_version(), "torch_hip": torch_hip(),
        "packages": {name: dist_version(names) for name, names in DISTRIBUTIONS.items()},
        "sources": manifest.get("sources") or {}, "lock_sha256": manifest.get("lock_sha256"),
        "manifest_sha256": "sha256:" + hashlib.sha256(raw).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True)
    parser.add_argument("--dir", type=Path, default=Path("/opt/atom-build"))
    args = parser.parse_args(argv)
    data = facts(args.arch, args.dir)
    (args.dir / "versions.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps(data, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
