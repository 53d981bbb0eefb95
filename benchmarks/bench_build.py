"""Build benchmarks on the offline profile, side by side in one run (not a test: numbers, not assertions).

    python benchmarks/bench_build.py [--arch gfx942] [--out benchmarks/results.json]

Measures, in order:
  cold      build-clean after `docker builder prune -af` and removing this plan's images: total and per step
  parallel  the wheels stage's parallelism: sum of BuildKit step times / wall time of the wheels build
  noop      build-clean again with nothing changed: seconds before validation starts (goal <= 5 s)
  patch     build-clean after changing one patch: only the patch layer and later rebuild (goal <= 20% of cold)
  install   the clean step (cold) / a plain `pip install --no-index` of the same wheels into a fresh host venv
            (goal <= 1.2)
  overhead  (image size - base size) / installed size of the venv (goal <= 1.05)
It prunes the BuildKit cache: run it on a build host you may do that on.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cleanbuild import engine, offline, profiles  # noqa: E402
from cleanbuild.arch import Arch  # noqa: E402
from cleanbuild.plan import Options, make_plan  # noqa: E402
from tests.support.tiny_model import make_tiny_model  # noqa: E402

PATCH_FILE = ROOT / "patches" / "catalog" / "jit_core_runtime_error.py"


def sh(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603


def build_clean(arch: str, model: Path, user: str) -> tuple[float, dict, str]:
    argv = [sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--arch", arch,
            "--model", str(model), "--user", user, "--progress", "plain"]
    start = time.monotonic()
    proc = sh(argv)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"build-clean failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    ref = re.findall(r"done: (\S+);", proc.stderr)[-1]
    repo, tag = ref.rsplit(":", 1)
    report = json.loads((ROOT / "reports" / repo.rsplit("/", 1)[-1] / tag / "report.json").read_text())
    return wall, report, proc.stderr


def steps(report: dict) -> dict[str, float]:
    return {s["name"]: s["seconds"] for s in report["steps"]}


def before_validation(report: dict) -> float:
    t = steps(report)
    return round(sum(t[k] for k in ("preflight", "wheels", "clean", "patch")), 2)


def wheels_parallelism(log: Path) -> dict:
    """BuildKit plain progress: '#N [stage k/n] ...' then '#N DONE 1.2s'. Sum the builder steps' times."""
    text = log.read_text(errors="replace")
    names = dict(re.findall(r"^#(\d+) \[([\w.-]+) \d+/\d+\]", text, re.MULTILINE))
    done = [(n, float(s)) for n, s in re.findall(r"^#(\d+) DONE (\d+\.\d+)s", text, re.MULTILINE)]
    builder = sum(s for n, s in done if n in names and names[n] not in ("wheels", "collect"))
    first = re.search(r"^#\d+ \[", text, re.MULTILINE)
    return {"sum_builder_step_s": round(builder, 2), "log": str(log), "stages": sorted(set(names.values())),
            "found_steps": first is not None}


def host_pip_install(wheels_dir: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        start = time.monotonic()
        sh([sys.executable, "-m", "venv", str(venv)])
        wheels = sorted(str(p) for p in wheels_dir.glob("*.whl"))
        proc = sh([str(venv / "bin" / "pip"), "install", "--no-index", "--no-deps", "--no-cache-dir", *wheels])
        if proc.returncode != 0:
            sys.exit(f"host pip install failed:\n{proc.stderr[-2000:]}")
        return time.monotonic() - start


def image_overhead(cli, image: str, base: str) -> dict:
    size = engine.inspect(cli, image)["Size"]
    base_size = engine.inspect(cli, base)["Size"]
    out = cli.containers.run(image, ["du", "-sb", "/opt/venv"], remove=True, network_mode="none").decode()
    installed = int(out.split()[0])
    return {"image_bytes": size, "base_bytes": base_size, "venv_bytes": installed,
            "ratio": round((size - base_size) / installed, 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="gfx942")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.json")
    args = p.parse_args()
    cli = engine.client()
    base, context = offline.ensure_standin_base(), offline.prepare_sources()
    plan = make_plan(profiles.load("offline"), Options(arch=Arch.parse(args.arch), context=context, base_image=base))
    model = make_tiny_model(Path(tempfile.mkdtemp()) / "model")
    results: dict = {"arch": args.arch, "machine": "2 cores, 24 GiB (CI kind)"}

    for ref in (plan.wheels.image, plan.clean.image):
        sh(["docker", "image", "rm", "-f", ref])
    sh(["docker", "builder", "prune", "-af"])
    wall, cold, _ = build_clean(args.arch, model, "bench-cold")
    results["cold"] = {"wall_s": round(wall, 1), "steps_s": steps(cold)}
    run_dir = ROOT / ".cache" / "runs" / cold["run_id"]
    par = wheels_parallelism(run_dir / "wheels.log")
    par["wall_s"] = steps(cold)["wheels"]
    par["ratio_wall_over_sum"] = round(par["wall_s"] / par["sum_builder_step_s"], 3) if par["sum_builder_step_s"] else None
    results["parallel"] = par

    wall, noop, _ = build_clean(args.arch, model, "bench-noop")
    results["noop"] = {"wall_s": round(wall, 1), "before_validation_s": before_validation(noop), "steps_s": steps(noop)}

    original = PATCH_FILE.read_bytes()
    try:
        PATCH_FILE.write_bytes(original + b"\n# benchmark: a one-line change to one patch\n")
        wall, changed, log = build_clean(args.arch, model, "bench-patch")
    finally:
        PATCH_FILE.write_bytes(original)
    rebuilt = steps(changed)
    results["patch"] = {"wall_s": round(wall, 1), "steps_s": rebuilt,
                        "build_s_vs_cold": round(before_validation(changed) / before_validation(cold), 3),
                        "total_vs_cold": round(wall / results["cold"]["wall_s"], 3)}

    with tempfile.TemporaryDirectory() as tmp:
        sh(["docker", "buildx", "build", "-f", str(plan.wheels.dockerfile), "--target", "wheels", "--network", "host",
            *[x for k, v in plan.wheels.build_args for x in ("--build-arg", f"{k}={v}")],
            "--output", f"type=local,dest={tmp}", str(plan.wheels.context)])
        host = host_pip_install(Path(tmp) / "wheels")
    results["install"] = {"clean_step_cold_s": steps(cold)["clean"], "host_pip_install_s": round(host, 1),
                          "ratio": round(steps(cold)["clean"] / host, 3)}
    results["overhead"] = image_overhead(cli, cold["image_id"], base)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
