"""Estimate a Triton GEMM config's shared-memory (LDS) need, and read aiter's GEMM config files.

Estimator: one A tile and one B tile per buffer,
    bytes = (BLOCK_M * BLOCK_K * a_bytes + BLOCK_K * BLOCK_N * b_bytes) * buffers
with buffers = max(1, num_stages) on NVIDIA (a cp.async/TMA ring of num_stages tiles) and
buffers = max(1, num_stages - 1) on AMD (Triton's stream pipeliner keeps the next tile in registers, so
num_stages=2 needs one LDS buffer). Unpipelined (num_stages=1) on NVIDIA, both tiles pass through shared memory
together on their way to the dot operand layout, so one buffer of A+B; on the H200 this matched Triton's
metadata.shared exactly for our kernel (docs/validation-h200.md).
Unpipelined on AMD, each operand's blocked -> dot-operand conversion goes through its own short-lived LDS
scratch, so the need is the larger tile, not the sum. That rule is inferred, not measured (no AMD GPU here):
aiter ships MI300X configs (e.g. MI300X-FF-A16W16-fused.json, 64x256x128 bf16, num_stages=1) that compile on a
64 KiB LDS and would not under the A+B rule.
The estimator ignores the epilogue (C through shared memory) and padding against bank conflicts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# bytes per element by the name token in aiter's config file names (FP4 is packed two per byte).
_BYTES = {"16": 2.0, "8": 1.0, "FP8": 1.0, "FP4": 0.5}
_DTYPES = re.compile(r"A(16|8|FP8|FP4)W(16|8|FP8|FP4)")


def lds_buffers(num_stages: int, vendor: str) -> int:
    return max(1, num_stages) if vendor == "nvidia" else max(1, num_stages - 1)


def estimate(bm: int, bn: int, bk: int, a_bytes: float, b_bytes: float, num_stages: int, vendor: str) -> int:
    a_tile, b_tile = bm * bk * a_bytes, bk * bn * b_bytes
    if vendor != "nvidia" and num_stages <= 1:
        return int(max(a_tile, b_tile))
    return int((a_tile + b_tile) * lds_buffers(num_stages, vendor))


def dtype_bytes(filename: str) -> tuple[float, float] | None:
    m = _DTYPES.search(filename)
    return (_BYTES[m.group(1)], _BYTES[m.group(2)]) if m else None


def configs_in(obj, prefix: str = ""):
    """Every dict with BLOCK_SIZE_M/N/K in a config file, however deeply the file nests them."""
    if isinstance(obj, dict):
        if all(f"BLOCK_SIZE_{d}" in obj for d in "MNK"):
            yield prefix or "config", obj
            return
        for k, v in obj.items():
            yield from configs_in(v, f"{prefix}.{k}" if prefix else str(k))


def aiter_config_files(aiter_root: Path, prefix: str, legacy_prefix: str = "") -> tuple[list[Path], str]:
    """The arch's Triton GEMM config files and the pattern that found them.

    aiter at the pin keeps configs/gemm/<prefix>-*.json plus the newer configs/<prefix>/triton/gemm/*.json;
    aiter before 2026-01 named the flat files by device (legacy_prefix, e.g. MI300X-*.json).
    """
    configs = aiter_root / "ops" / "triton" / "configs"
    found = sorted((configs / "gemm").glob(f"{prefix}-*.json"))
    found += sorted((configs / prefix / "triton" / "gemm").glob("*.json"))
    if found:
        return found, f"gemm/{prefix}-*.json, {prefix}/triton/gemm/*.json"
    if legacy_prefix:
        legacy = sorted((configs / "gemm").glob(f"{legacy_prefix}-*.json"))
        if legacy:
            return legacy, f"gemm/{legacy_prefix}-*.json (aiter before 2026-01)"
    return [], f"gemm/{prefix}-*.json"


def load_json(path: Path):
    return json.loads(path.read_text())
