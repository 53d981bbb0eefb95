"""The venv unit's (or any clean/wheels unit's) image export under other `--output` settings: a cold single first
(bench_build.py's, unless --skip-cold), then each unit rebuilt `--no-cache` once per setting, with the seconds of
its RUN and of BuildKit's "exporting to image" vertex, and the stored image's size. Prints only; nothing is
recorded (where the containerd store's export seconds go: CHANGELOG.md, 2026-12-03 night).

    ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/export_settings.py venv zstd,zstd1,zstd7,uncompressed
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_build  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.core import engine  # noqa: E402
from cleanbuild.images import buildx_argv  # noqa: E402
from cleanbuild.images.plan import build_spec  # noqa: E402
from devsupport.builds import offline_plan  # noqa: E402

IMAGE = "type=image,oci-mediatypes=true,compression="
OUTPUTS = {
    "zstd": IMAGE + "zstd", "zstd1": IMAGE + "zstd,compression-level=1", "zstd7": IMAGE + "zstd,compression-level=7",
    "gzip1": IMAGE + "gzip,compression-level=1", "uncompressed": IMAGE + "uncompressed",
    "zstd-nounpack": IMAGE + "zstd,unpack=false", "cacheonly": "type=cacheonly",
}
_DONE = re.compile(r"^(#\d+) DONE ([0-9.]+)s", re.M)
_NAME = re.compile(r"^(#\d+) (\[.*|exporting to image)$", re.M)


def once(plan, unit: str, setting: str, meta: Path) -> str:
    spec = build_spec(plan.unit(unit))
    flags = ("--no-cache", "--build-arg", f"SOURCE_DATE_EPOCH={buildx_argv.SOURCE_DATE_EPOCH}", "--provenance=false",
             "--metadata-file", str(meta), "--output", OUTPUTS[setting])
    start = time.monotonic()
    done = subprocess.run(buildx_argv.argv(spec, plan.options, flags, tagged=False), capture_output=True, text=True,  # noqa: S603
                          check=False)
    wall = time.monotonic() - start
    names = dict(_NAME.findall(done.stderr))
    slow = {names.get(v, v)[:60]: float(s) for v, s in _DONE.findall(done.stderr) if float(s) > 0.5}
    size = ""
    if done.returncode == 0 and setting != "cacheonly":
        digest = json.loads(meta.read_text())["containerimage.digest"]
        size = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", digest],  # noqa: S603,S607
                              capture_output=True, text=True, check=False).stdout.strip()
    return f"{unit} {setting}: exit {done.returncode}, wall {wall:.1f} s, {slow}, size {size}"


def main() -> int:
    units, settings = sys.argv[1].split(","), sys.argv[2].split(",")
    client = engine.client()
    plan = offline_plan(bench_build.MATRIX[3], run_id="bench")
    if "--skip-cold" not in sys.argv:
        print(json.dumps(bench_build.single(client)["steps"]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for unit in units:
            for setting in settings:
                print(once(plan, unit, setting, Path(tmp) / "meta.json"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
