"""`python -m validation.tritoncache check` in a process of its own, for the validation check first-use-compile and
audit's finding of the same name: the calling process may run Triton's interpreter (which compiles nothing), or
hold another aiter. The image's manifest decides the models and sizes when there is one; else the caller's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from validation.warmcache.cache import MANIFEST


def replay(arch: str, ck_mode: str, model: str | None, tp: tuple[int, ...], *, aiter_src: Path | None = None,
           env: Mapping[str, str] | None = None, manifest: Path = MANIFEST) -> tuple[dict | None, str]:
    """(the check's JSON, "") or (None, why it did not finish). Without a manifest and without a model: None and
    the reason (nothing says which kernels the image runs)."""
    environ = dict(os.environ if env is None else env)
    environ.pop("TRITON_INTERPRET", None)
    extra = []
    if not manifest.is_file():
        if not model:
            return None, (f"this image has no Triton cache manifest ({manifest}: built without the warm step) and no "
                          "model was given to replay")
        extra = ["--model", model, "--tp", *map(str, tp)]
    with tempfile.TemporaryDirectory(prefix="first-use-") as tmp:
        out = Path(tmp) / "check.json"
        cache = environ.get("TRITON_CACHE_DIR") or str(Path(tmp) / "no-cache")
        Path(cache).mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "validation.tritoncache", "check", "--arch", arch, "--ck-mode", ck_mode,
                "--cache", cache, "--manifest", str(manifest), "--json-file", str(out), *extra]
        argv += ["--aiter-src", str(aiter_src)] if aiter_src is not None else []
        proc = subprocess.run(argv, capture_output=True, text=True, env=environ, check=False)  # noqa: S603
        if not out.is_file():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()] or [f"exit {proc.returncode}"]
            return None, f"python -m validation.tritoncache check did not finish: {lines[-1]}"
        return json.loads(out.read_text()), ""


def summary(result: dict) -> tuple[bool, str]:
    """(no kernel compiles at first use and nothing failed, the line that says so)."""
    missed, where = result["compiled_at_first_use"], f"{result['target']}, Triton {result['triton']}"
    models = f"{', '.join(result['models'])} tp {result['tp']}"
    if missed:
        return False, (f"{len(missed)} of {result['kernels']} kernels compile at first use ({models}, {where}): "
                       + ", ".join(missed[:8]) + (" ..." if len(missed) > 8 else "")
                       + "".join(f"; {w}" for w in result.get("why") or []))
    return not result["failures"], (f"compiles at first use: 0 of {result['kernels']} kernels from "
                                    f"{result['calls']} calls ({models}, {where})")
