"""The reproducible export's cost per layer compression (numbers, not assertions: not a test).

    DOCKER_HOST=unix:///run/d26.sock python benchmarks/bench_export.py [UNIT] [gzip zstd zstd-1 uncompressed ...]

Builds one unit of gfx950 CK-free (default: venv, the 2.7 GB layer) with --no-cache to an OCI archive with
SOURCE_DATE_EPOCH and rewrite-timestamp=true, once per compression (KIND-LEVEL: that compression-level), then `docker load`s it: build and load
seconds, archive bytes, manifest digest; the rows go to results.json's "export" entry. Needs Docker >= 26 with the containerd image store and the unit's
FROM images present (a build of the offline profile first). Builds now export straight into the image store without
rewrite-timestamp (cleanbuild.images.imagestore, docker/scripts/clamp_times.py); this script keeps the path it measured
then, for its rows.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild import engine  # noqa: E402
from cleanbuild.images import buildx_argv  # noqa: E402
from cleanbuild.images.plan import build_spec  # noqa: E402
from tests.support.builds import VARIANTS, offline_plan  # noqa: E402


def measure(spec, options, compression: str) -> dict:
    archive = Path(f"/tmp/bench-export-{compression}.tar")
    out = f"type=oci,dest={archive},rewrite-timestamp=true"
    kind, _, level = compression.partition("-")  # zstd-1: zstd at compression-level 1
    if kind != "gzip":
        out += f",compression={kind},force-compression=true"
    if level:
        out += f",compression-level={level}"
    cmd = buildx_argv.argv(spec, options, ("--no-cache", "--build-arg", f"SOURCE_DATE_EPOCH={buildx_argv.SOURCE_DATE_EPOCH}",
                                           "--provenance=false", "--output", out))
    start = time.monotonic()
    built = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
    build_s = time.monotonic() - start
    if built.returncode:
        return {"compression": compression, "error": built.stderr[-500:]}
    start = time.monotonic()
    subprocess.run(["docker", "load", "-i", str(archive)], capture_output=True, check=True)  # noqa: S603,S607
    result = {"compression": compression, "build_s": round(build_s, 1), "load_s": round(time.monotonic() - start, 1),
              "archive_bytes": archive.stat().st_size, "digest": manifest_digest(archive)}
    archive.unlink()
    return result


def manifest_digest(archive: Path) -> str:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        return json.loads(member.read())["manifests"][0]["digest"] if member else ""


def main() -> int:
    unit = sys.argv[1] if len(sys.argv) > 1 else "venv"
    plan = offline_plan(VARIANTS[0], run_id="bench-export")
    spec = build_spec(plan.unit(unit))
    rows = []
    for compression in sys.argv[2:] or ["gzip", "zstd", "uncompressed"]:
        rows.append(measure(spec, plan.options, compression))
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
