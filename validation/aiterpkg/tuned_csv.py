"""aiter's tuned bf16 GEMM CSVs: where they are, what they cover, and the untuned CSV of the gaps.

Conventions follow aiter/jit/core.py: AITER_CONFIG_GEMM_BF16 (colon-separated) overrides the default, which
is configs/bf16_tuned_gemm.csv merged with model_configs/*bf16_tuned_gemm* (not the untuned ones).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

REQUIRED = ("cu_num", "M", "N", "K", "libtype")
# aiter/configs/bf16_untuned_gemm.csv's header: the input format of aiter's GEMM tuner.
UNTUNED_COLUMNS = ("M", "N", "K", "bias", "dtype", "outdtype", "scaleAB")
BF16 = "torch.bfloat16"
# A model whose shapes the tuned CSV covers less than this share of is a WARNING (not "passed") in validation,
# the build report and the audit: its untuned shapes run aiter's default (hipBLASLt with the patch; torch
# without). `--min-coverage` turns a share into a failure (exit 1).
COVERAGE_WARN_BELOW = 0.9


class CsvError(Exception):
    """A tuned CSV that is missing or cannot be read: a failure of the check, not a crash."""


@dataclass(frozen=True)
class Key:
    cu_num: int
    M: int
    N: int
    K: int
    bias: bool = False
    dtype: str = BF16
    outdtype: str = BF16
    scaleAB: bool = False


def tuned_paths(explicit: list[str] | None, aiter_root: Path | None) -> tuple[list[Path], str]:
    """The CSVs aiter would read, and where that choice came from."""
    if explicit:
        return [Path(p) for p in explicit], "--tuned-csv"
    env = os.environ.get("AITER_CONFIG_GEMM_BF16")
    if env:
        return [Path(p) for p in env.split(":") if p], "AITER_CONFIG_GEMM_BF16"
    if aiter_root is None:
        return [], ""
    configs = aiter_root / "configs"
    extra = sorted(p for p in (configs / "model_configs").glob("*bf16_tuned_gemm*")
                   if p.is_file() and "untuned" not in p.name)
    return [configs / "bf16_tuned_gemm.csv", *extra], f"aiter at {aiter_root}"


def _bool(v: str) -> bool:
    return v.strip().lower() in ("true", "1")


def _rows(path: Path, gfx: str):
    """(line number, row) for rows of this gfx (or with no gfx), streamed: aiter's tuned CSVs reach 100+ MB.

    Rows of other archs are dropped on their gfx cell alone, before a dict is built for them.
    """
    if not path.is_file():
        raise CsvError(f"tuned CSV not found: {path}")
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f, skipinitialspace=True)
            cols = [c.strip() for c in next(reader, None) or []]
            missing = [c for c in REQUIRED if c not in cols]
            if missing:
                raise CsvError(f"{path}: missing columns {', '.join(missing)} (has: {', '.join(cols) or 'none'})")
            gi = cols.index("gfx") if "gfx" in cols else None
            for line, values in enumerate(reader, start=2):
                if not values or (gi is not None and gi < len(values) and values[gi].strip() not in ("", gfx)):
                    continue
                yield line, {c: v.strip() for c, v in zip(cols, values, strict=False) if c}
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise CsvError(f"{path}: cannot read: {e}") from e


def row_key(row: dict[str, str], where: str) -> Key:
    try:
        return Key(int(row["cu_num"]), int(row["M"]), int(row["N"]), int(row["K"]),
                   _bool(row.get("bias", "False")), row.get("dtype", BF16) or BF16,
                   row.get("outdtype", BF16) or BF16, _bool(row.get("scaleAB", "False")))
    except (KeyError, ValueError) as e:
        raise CsvError(f"{where}: malformed row {row}: {e}") from e


def index(paths: list[Path], gfx: str, cu_num: int | None = None) -> dict[Key, dict[str, str]]:
    """Rows for this gfx (when the CSV has a gfx column; older CSVs key on cu_num alone), and this cu_num if given.

    Only the kept rows stay in memory, so a large CSV costs its target rows, not its size.
    """
    table: dict[Key, dict[str, str]] = {}
    for path in paths:
        for line, row in _rows(path, gfx):
            key = row_key(row, f"{path}:{line}")
            if cu_num is None or key.cu_num == cu_num:
                table.setdefault(key, row)
    return table


@dataclass(frozen=True)
class Gap:
    layer: str
    M: int
    N: int
    K: int


def coverage(shapes, m_buckets, table: dict[Key, dict], cu_num: int) -> tuple[int, list[Gap]]:
    """Exact (M, N, K) lookups. aiter may also try a padded M (a compiled op), so this is conservative."""
    wanted = {(m, s.N, s.K): s.layer for s in shapes for m in m_buckets}
    gaps = [Gap(layer, m, n, k) for (m, n, k), layer in sorted(wanted.items())
            if Key(cu_num, m, n, k) not in table]
    return len(wanted), gaps


def write_untuned(path: Path, gaps: list[Gap]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(UNTUNED_COLUMNS)
        for g in gaps:
            w.writerow([g.M, g.N, g.K, False, BF16, BF16, False])
