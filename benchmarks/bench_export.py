"""What the image store costs one unit's export, per way of exporting it (numbers, not assertions: not a test).

    python benchmarks/bench_export.py [UNIT] [ours gzip default ...]

Builds one unit of gfx950 CK-free (default: venv, the 2.5 GB layer) with --no-cache, once per way, one after the
other, and reads the seconds of BuildKit's "exporting to image" from each log (benchmarks/buildkit_log.py):
  ours      the pipeline's reproducible export straight into the image store (buildx_argv.image_store: zstd, OCI
            media types, SOURCE_DATE_EPOCH, no provenance)
  gzip      the same with gzip, the engine's default compression
  default   what a plain `docker buildx build --load` does on this engine: its default exporter, compression and
            provenance, no SOURCE_DATE_EPOCH (tagged atom-build/bench-export:default, removed afterwards)
The rows go to results.json's "export" entry. Needs the unit's FROM images (a build of the offline profile first).
An image the reproducible ways export is the unit's own image when its bytes match: it is left in place.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildkit_log import exporting_seconds  # noqa: E402  (benchmarks/, the script's folder)
from results_file import record  # noqa: E402

from cleanbuild.core import engine  # noqa: E402
from cleanbuild.images import buildx_argv  # noqa: E402
from cleanbuild.images.plan import build_spec  # noqa: E402
from devsupport.builds import VARIANTS, offline_plan  # noqa: E402

DEFAULT_TAG = "atom-build/bench-export:default"


def output(way: str, metadata: Path) -> tuple[tuple[str, ...], bool]:
    """The way's output flags, and whether the build is tagged (only the engine's default is)."""
    ours = buildx_argv.image_store(metadata)
    if way == "ours":
        return ours, False
    if way == "gzip":
        return tuple(a.replace("compression=zstd", "compression=gzip") for a in ours), False
    if way == "default":
        return buildx_argv.load(), True
    raise SystemExit(f"{way}: not a way; the ways are ours, gzip, default")


def measure(spec, options, way: str) -> dict:
    log = Path(f"/tmp/bench-export-{way}.log")
    flags, tagged = output(way, Path(f"/tmp/bench-export-{way}.json"))
    target = replace(spec, image=DEFAULT_TAG) if tagged else spec
    cmd = buildx_argv.argv(target, options, ("--no-cache", *flags), tagged=tagged)
    start = time.monotonic()
    with log.open("w") as fh:
        built = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)  # noqa: S603
    wall = round(time.monotonic() - start, 1)
    if tagged:
        subprocess.run(["docker", "rmi", DEFAULT_TAG], capture_output=True, check=False)  # noqa: S603,S607
    if built.returncode:
        return {"way": way, "error": log.read_text()[-500:]}
    return {"way": way, "wall_s": wall, "export_s": exporting_seconds(log.read_text(errors="replace"))}


def main() -> int:
    unit = sys.argv[1] if len(sys.argv) > 1 else "venv"
    plan = offline_plan(VARIANTS[0], run_id="bench-export")
    spec = build_spec(plan.unit(unit))
    rows = []
    for way in sys.argv[2:] or ["ours", "gzip", "default"]:
        rows.append(measure(spec, plan.options, way))
        print(json.dumps({"unit": unit, **rows[-1]}), flush=True)
    facts = engine.preflight(engine.client(), 1.0)
    store = "containerd image store" if facts.containerd_store else "classic image store"
    record(ROOT / "benchmarks" / "results.json", "export", {
        "date": dt.date.today().isoformat(), "engine": f"Docker {facts.version}, {store}",
        "command": " ".join(["python", "benchmarks/bench_export.py", *sys.argv[1:]]),
        "result": {"unit": unit, "rows": [r for r in rows if "error" not in r]}})
    print("then: python benchmarks/render.py --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
