"""What each preset's route needs in a CK-free image (issue 60), before and after the image sets ATOM's own
ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE=0: the layers routed, those that may need a module a CK-free build leaves out,
those modules, and the seconds `python -m validation.route` takes in a fresh process (a cold walk: every file parsed).
ATOM and aiter at the pins from the shared upstream copies, patched as the image holds them (`python -m patches
apply`); the environment is the CK-free image's (docker/Dockerfile.clean's ck-0 stage), "before" with the switch at
ATOM's default.

    ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/route_walk.py
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

from devsupport.builds import ck_free_env  # noqa: E402
from devsupport.upstream import AITER_PIN, ATOM_PIN, upstream_dir  # noqa: E402

MODELS = ("llama3-8b", "qwen3-30b-a3b", "deepseek-v3")
SWITCH = "ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE"
NO_FLYDSL = ("flydsl is listed because the Python that read the code has no flydsl package; the images install it "
             "(aiter's FLYDSL_VERSION), so there it is present")


def patched_site(folder: Path) -> Path:
    for name, commit in (("aiter", AITER_PIN), ("atom", ATOM_PIN)):
        git = ["git", "-c", "safe.directory=*", f"--git-dir={upstream_dir() / f'{name}.git'}", "archive", commit, name]
        tar = subprocess.run(git, capture_output=True, check=True).stdout  # noqa: S603
        subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)  # noqa: S603,S607
    subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(folder)], cwd=ROOT, check=True,  # noqa: S603
                   capture_output=True)
    return folder


def route(site: Path, model: str, env: dict[str, str], out: Path) -> dict:
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith(("ATOM_", "AITER_"))}, **env,
               "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "validation.route", "--model", model, "--ck-mode", "ckfree",  # noqa: S603
                           "--json-file", str(out)], cwd=ROOT, env=environ, capture_output=True, text=True, check=False)
    seconds = round(time.perf_counter() - start, 2)
    data = json.loads(out.read_text())
    return {"exit": proc.returncode, "seconds": seconds, "layers": len(data["layers"]),
            "unservable": sum(1 for lr in data["layers"] if any(not k["present"] for k in lr["kernels"])),
            "modules": sorted({m["module"] for m in data["missing"]}), "unresolved": data["unresolved"]}


def main() -> int:
    env = ck_free_env()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        site = patched_site(Path(tmp))
        for model in MODELS:
            rows[model] = {"before": route(site, model, {**env, SWITCH: "1"}, Path(tmp) / "b.json"),
                           "after": route(site, model, env, Path(tmp) / "a.json")}
            print(model, json.dumps(rows[model]))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,  # noqa: S607
                            check=True).stdout.strip()
    record(ROOT / "benchmarks" / "results.json", "route", {
        "date": datetime.date.today().isoformat(), "checkout": commit, "engine": "none (no build: code read)",
        "command": "python benchmarks/route_walk.py (ATOM 181b0f46 and aiter 79366eb8 patched, the CK-free image's "
                   f"environment; before: {SWITCH}=1, ATOM's default)", "result": {"models": rows},
        **({} if importlib.util.find_spec("flydsl") else {"note": NO_FLYDSL})})
    return 0


if __name__ == "__main__":
    sys.exit(main())
