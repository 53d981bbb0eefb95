"""Structural check inside the clean image, with no network and no GPU (stdlib only).

Imports every installed component that can import without a GPU; aiter (and so ATOM, which imports it) reads the
ROCm install at import time, so without ROCm they are checked by their files instead, and the report says so.
Also checks the build facts and the single-arch environment. Writes /opt/atom-build/structure.json; exit 1 on
any failure.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

# module -> files (relative to the package folder) that must exist even when the import needs a GPU.
REQUIRED = {
    "torch": [],
    "triton": [],
    "aiter": ["jit/core.py", "tuned_gemm.py", "ops/triton", "configs"],
    "atom": ["utils/envs.py", "model_ops/linear.py", "examples/simple_inference.py"],
}
OPTIONAL = ["torchvision", "torchaudio", "flydsl", "mori", "transformers"]
BUILD_FILES = ["versions.json", "manifest.json", "smoke.py"]


def check_module(name: str, files: list[str], required: bool) -> dict:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return {"module": name, "ok": not required, "status": "absent"}
    entry = {"module": name, "origin": spec.origin}
    try:
        importlib.import_module(name)
        entry.update(ok=True, status="imported")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is reported, then the files decide
        entry["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-500:]
        roots = [Path(p) for p in (spec.submodule_search_locations or [])]
        missing = [f for f in files if not any((root / f).exists() for root in roots)]
        entry.update(ok=bool(files) and not missing, status="files-checked", missing=missing)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True)
    parser.add_argument("--dir", type=Path, default=Path("/opt/atom-build"))
    args = parser.parse_args(argv)
    results = [check_module(m, f, True) for m, f in REQUIRED.items()]
    results += [check_module(m, [], False) for m in OPTIONAL]
    problems = [f"{r['module']}: {r.get('import_error') or r['status']} {r.get('missing') or ''}".strip()
                for r in results if not r["ok"]]
    problems += [f"missing {args.dir / f}" for f in BUILD_FILES if not (args.dir / f).is_file()]
    for var in ("GPU_ARCHS", "PYTORCH_ROCM_ARCH"):
        if os.environ.get(var) != args.arch:
            problems.append(f"{var}={os.environ.get(var)!r}, expected the one arch {args.arch!r}")
    mode = os.environ.get("ATOM_BUILD_CK_MODE")
    if mode not in ("ck", "ckfree"):
        problems.append(f"ATOM_BUILD_CK_MODE={mode!r}, expected ck or ckfree")
    if mode == "ckfree" and os.environ.get("ATOM_CK_FREE") != "1":
        problems.append("CK-free image without ATOM_CK_FREE=1")
    report = {"ok": not problems, "modules": results, "problems": problems}
    (args.dir / "structure.json").write_text(json.dumps(report, indent=1) + "\n")
    for r in results:
        print(f"structure: {r['module']:<15} {r['status']}")
    for line in problems:
        print(f"structure: error: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
