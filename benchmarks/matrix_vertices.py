"""One cold four-variant matrix (bench_build.py's matrix row), then where each variant's units spent their time:
for every unit's BuildKit log (`<unit>.log` in the variant's run folder), how many vertices were cached and its
three slowest vertices. Prints only; nothing is recorded (bench_build.py's rows are the measurements).

    ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/matrix_vertices.py
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_build  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.core import engine  # noqa: E402

_NAME = re.compile(r"^(#\d+) (\[.*)$", re.M)
_END = re.compile(r"^(#\d+) (DONE|CACHED) ?([0-9.]*)s?", re.M)


def slowest(text: str, count: int = 3) -> tuple[int, list[tuple[float, str]]]:
    """(cached vertices, the count slowest finished vertices as (seconds, name)) of one plain-progress log."""
    names = dict(_NAME.findall(text))
    ends = _END.findall(text)
    done = sorted(((float(s or 0), names.get(v, "?")[:110]) for v, kind, s in ends if kind == "DONE"), reverse=True)
    return sum(1 for _, kind, _ in ends if kind == "CACHED"), done[:count]


def main() -> int:
    start = time.monotonic()
    result, plans = bench_build.matrix(engine.client())
    print(f"matrix {time.monotonic() - start:.1f} s", json.dumps(result["steps"]))
    for plan in plans:
        print("==", plan.stem)
        for log in sorted(plan.options.run_dir.glob("*.log")):
            cached, top = slowest(log.read_text(errors="replace"))
            print(f"  {log.stem}: cached {cached}; " + " | ".join(f"{s:.1f}s {n}" for s, n in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
