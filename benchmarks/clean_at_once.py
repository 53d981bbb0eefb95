"""The clean step's three layers (venv, atom-layer, clean) from a pruned BuildKit cache, in turn: one after another
(each FROM the image below, as schedule.ensure builds them) and all three builds started at once, each naming the
lower layers' stages (cleanbuild.images.atonce.stage_args). Prints each way's wall and image IDs, and whether
they match the first one-after-another run's. On the engine at DOCKER_HOST; it is how Docker 20.10's classic
store was found no faster at once (CHANGELOG.md, 2026-12-03 night). Prints only; nothing is recorded.

    ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/clean_at_once.py 2
    DOCKER_HOST=unix:///run/docker20.sock ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/clean_at_once.py 2
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_build  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.core import engine  # noqa: E402
from cleanbuild.images import atonce, buildx_argv, pipeline, schedule  # noqa: E402
from cleanbuild.images.plan import CLEAN_UNITS, build_spec  # noqa: E402
from cleanbuild.images.record import clean_labels  # noqa: E402
from devsupport.builds import forget, offline_plan  # noqa: E402

BUILD = ("preflight", "prepare", "wheels")


def cold(client, plan) -> None:
    forget(client, [plan.unit(n) for n in (*CLEAN_UNITS, "candidate")])
    bench_build.builder_prune()


def one_after_another(client, plan, rec) -> tuple[float, dict[str, str]]:
    cold(client, plan)
    site, own = schedule.Site(plan, client, rec.engine), {"clean": clean_labels(plan, rec)}
    start = time.monotonic()
    done = [schedule.ensure(site, plan.unit(n), own.get(n, ())) for n in CLEAN_UNITS]
    return time.monotonic() - start, {u.name: u.image_id for u in done}


def at_once(client, plan, labels: dict[str, dict[str, str]], reproducible: bool) -> tuple[float, dict[str, str]]:
    cold(client, plan)
    units = [plan.unit(n) for n in CLEAN_UNITS]
    with tempfile.TemporaryDirectory() as tmp:
        out = {u.name: Path(tmp) / u.name for u in units}
        start = time.monotonic()
        procs = {}
        for u in units:
            spec = build_spec(u)
            spec = type(spec)(**{**spec.__dict__, "build_args": atonce.stage_args(units, u)})
            flags = buildx_argv.image_store(out[u.name]) if reproducible else buildx_argv.load(out[u.name])
            argv = buildx_argv.argv(spec, plan.options, flags, labels=tuple(labels[u.name].items()), tagged=False)
            procs[u.name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
        if any(p.wait() for p in procs.values()):
            sys.exit("a build failed")
        wall = time.monotonic() - start
        read = (lambda p: json.loads(p.read_text())["containerimage.digest"]) if reproducible else (lambda p: p.read_text().strip())
        return wall, {n: read(p) for n, p in out.items()}


def main() -> int:
    client = engine.client()
    reproducible = engine.preflight(client, 1.0).reproducible
    plan = offline_plan(bench_build.MATRIX[3], run_id="bench")
    rec = pipeline.run(plan, client, BUILD, failed_report=False)
    wall, first = one_after_another(client, plan, rec)
    print(f"one after another: {wall:.1f} s {first}", flush=True)
    labels = {n: engine.inspect(client, i)["Config"]["Labels"] or {} for n, i in first.items()}
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
        wall, ids = at_once(client, plan, labels, reproducible)
        print(f"at once: {wall:.1f} s, same IDs: {ids == first}", flush=True)
        wall, ids = one_after_another(client, plan, rec)
        print(f"one after another: {wall:.1f} s, same IDs: {ids == first}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
