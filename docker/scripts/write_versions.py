"""Write /opt/atom-build/versions.json: what is installed in this image (stdlib only; runs inside the image)."""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import platform
import sys
from pathlib import Path

# Component -> distribution names to try, first found wins (mori ships under more than one name).
DISTRIBUTIONS = {
    "torch": ["torch"],
    "torchvision": ["torchvision"],
    "torchaudio": ["torchaudio"],
    "triton": ["triton", "pytorch-triton-rocm"],
    "triton_kernels": ["triton-kernels", "triton_kernels"],
    "aiter": ["amd-aiter", "aiter"],
    "atom": ["atom"],
    "flydsl": ["flydsl"],
    "mori": ["amd-mori-nightly", "mori", "amd-mori"],
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
    return info.read_text().strip() or None if info.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True)
    parser.add_argument("--enable-ck", choices=("0", "1"), required=True)
    parser.add_argument("--out", type=Path, default=Path("/opt/atom-build/versions.json"))
    args = parser.parse_args(argv)
    facts = {name: dist_version(names) for name, names in DISTRIBUTIONS.items()}
    facts.update({
        "torch_hip": torch_hip(),
        "python": platform.python_version(),
        "rocm": rocm_version(),
        "arch": args.arch,
        "ck_mode": "ck" if args.enable_ck == "1" else "ckfree",
    })
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    print(json.dumps(facts, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
