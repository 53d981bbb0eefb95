"""`python -m tests.support.aiter_loaded AITER_PKG EMPTY_FOLDER`: what validation.aiterpkg.adapter leaves in a process
that loads aiter's source at the pin (tests/validation/aiterpkg/test_adapter.py), as one JSON object on stdout.

A process of its own, because importing aiter's kernel modules registers torch library ops that torch cannot take
down at exit: aiter defines `aiter::aiter::gemm_a16w16_`, and torch's exit hook (torch/library.py `_del_library`)
fails on the doubled namespace with a "too many values to unpack" traceback, which would end the test tier's log.
This process leaves by os._exit once its answer is written, so that hook does not run here either.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module loads, as tests/validation/conftest.py

from validation.aiterpkg import adapter  # noqa: E402
from validation.aiterpkg.triton_ops import KERNELS  # noqa: E402

PIN_MODULES = [k.module for k in KERNELS.values()] + [k.jit_module for k in KERNELS.values()]
GEMM = "aiter.ops.triton._triton_kernels.gemm.basic.gemm_a16w16"
ARCHS = ("gfx942", "gfx950")


def from_source(module: Any, pkg: Path) -> bool:
    paths = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", [])]
    return any(p.startswith(str(pkg)) for p in paths if p)


def config_after(lookup: Any, before: str, target: str) -> dict[str, Any]:
    """The gemm config aiter looks up for target right after it looked one up for before (same shape)."""
    adapter.set_arch(before, interpreting=True)
    lookup(128, 1000, 1000)  # caches the other arch's answer under an arch-free key
    adapter.set_arch(target, interpreting=True)
    config, _ = lookup(128, 1000, 1000)
    return dict(config)


def second_source(empty: Path) -> str:
    try:
        adapter.import_source(empty)
    except adapter.AdapterError as exc:
        return str(exc)
    return ""


def facts(pkg: Path, empty: Path) -> dict[str, Any]:
    adapter.import_source(pkg)
    adapter.set_arch("gfx942", interpreting=True)
    loaded = {name: __import__(name, fromlist=["_"]) for name in PIN_MODULES}
    aiter = {k: v for k, v in sys.modules.items() if k == "aiter" or k.startswith("aiter.")}
    out: dict[str, Any] = {
        "files": {name: module.__file__ for name, module in loaded.items()},
        "jit_core_imported": "aiter.jit.core" in sys.modules,
        "stand_ins": sorted(k for k, m in aiter.items() if not from_source(m, pkg)),
        "configs": {f"{a}>{b}": config_after(loaded[GEMM]._get_config, a, b) for a in ARCHS for b in ARCHS if a != b},
    }
    out["fp8"] = {}
    for arch in ARCHS:
        adapter.set_arch(arch, interpreting=True)
        out["fp8"][arch] = str(sys.modules["aiter"].dtypes.fp8)
    out["second_source"] = second_source(empty)
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(facts(Path(sys.argv[1]), Path(sys.argv[2])), default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)  # not the interpreter's exit: torch's exit hook fails on aiter's op (see above)
