"""The warm step's cost (issue 55): the patch step of an offline gfx950 CK-free build with the Triton cache warmed
(the profile's warm.models) and without it (warm.enabled=false), in alternating rounds, each from the same reused
clean image with BuildKit's cache pruned first, so the candidate's RUNs run again. The candidate is rebuilt
whenever anything below it changes, so its seconds here are what the warm step adds to a cold build and to any
bump alike. Also the bytes the warm adds to the image (the candidate's own layers) and what it compiled.

    ATOM_BUILD_MIRROR=../shared/upstream ATOM_BUILD_TORCH_INDEX=... python benchmarks/warm_step.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

MODES = {"warm": (), "off": ("--set", "warm.enabled=false")}


def forget_candidates() -> None:
    """Every candidate image gone (found by its unit label, whatever its names), so the next build makes one."""
    from cleanbuild.core.engine import UNIT_LABEL

    ids = subprocess.run(["docker", "images", "-q", "--filter", f"label={UNIT_LABEL}=candidate"],  # noqa: S603,S607
                         capture_output=True, text=True, check=True).stdout.split()
    for image in sorted(set(ids)):
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)  # noqa: S603,S607


def build(mode: str, user: str) -> dict:
    forget_candidates()
    subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True, check=True)  # noqa: S607
    argv = [sys.executable, "-m", "cleanbuild.cli.main", "build-clean", "--profile", "offline", "--arch", "gfx950",
            "--ck-free", "--allow-no-smoke", "--allow-unservable", "--user", user, "--progress", "plain", *MODES[mode]]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{mode} build failed: {proc.stderr[-2000:]}")
    said = (proc.stdout + proc.stderr).splitlines()
    folder = next(line.split("; report ", 1)[1].split(";")[0].strip() for line in said if line.startswith("done: "))
    report = json.loads((Path(folder) / "report.json").read_text())
    patch = next(s for s in report["steps"] if s["name"] == "patch")
    candidate = next(u for u in report["units"] if u["name"] == "candidate")
    own = [layer["size"] for layer in report["layer_sizes"] if layer.get("unit") == "candidate"]
    cache = report.get("triton_cache") or {}
    return {"mode": mode, "patch_s": patch["seconds"], "candidate_s": candidate["seconds"],
            "candidate_how": candidate["how"], "candidate_layer_bytes": sum(own), "image_bytes": report["image_size_bytes"],
            "kernels": cache.get("kernels"), "cache_bytes": cache.get("bytes"), "warm_seconds": cache.get("seconds"),
            "wall_s": round(wall, 1)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args()
    build("warm", "bench-warm-prime")  # every unit below the candidate, once, so each round reuses them
    runs = []
    for i in range(args.rounds):
        for mode in (("off", "warm") if i % 2 == 0 else ("warm", "off")):
            runs.append({"round": i + 1, **build(mode, f"bench-warm-{i}")})
            print(json.dumps(runs[-1]), file=sys.stderr)
    medians = {m: {k: statistics.median(r[k] for r in runs if r["mode"] == m)
                   for k in ("patch_s", "candidate_s", "candidate_layer_bytes")} for m in MODES}
    result = {"runs": runs, "medians": medians,
              "adds": {"patch_s": round(medians["warm"]["patch_s"] - medians["off"]["patch_s"], 2),
                       "bytes": medians["warm"]["candidate_layer_bytes"] - medians["off"]["candidate_layer_bytes"]}}
    print(json.dumps(result, indent=1))
    if not args.no_record:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,  # noqa: S607
                              text=True, check=True).stdout.strip()
        engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,  # noqa: S607
                                text=True, check=True).stdout.strip()
        record(ROOT / "benchmarks" / "results.json", "warm_step", {
            "date": datetime.date.today().isoformat(), "checkout": head, "engine": f"Docker {engine}",
            "command": f"python benchmarks/warm_step.py --rounds {args.rounds}", "result": result})


if __name__ == "__main__":
    main()
