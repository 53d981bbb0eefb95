"""What each preset's route needs in a CK-free image (issue 60): the layers routed, those that may need a module a
CK-free build leaves out, those modules, and the seconds `python -m validation.route` takes in a fresh process (a cold
walk: every file parsed). ATOM and aiter at the pins from the shared upstream copies, patched as the image holds them
(`python -m patches apply`); the environment is the CK-free image's (docker/Dockerfile.clean's ck-0 stage).

"before" is another checkout of this repo (--before DIR: its patches applied and its validation.route run, in the
same run, on the same machine); without it, "before" is this checkout with ATOM's
ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE at its default "1" instead of the image's "0".

    ATOM_BUILD_MIRROR=../shared/upstream python benchmarks/route_walk.py [--before DIR]
"""

from __future__ import annotations

import argparse
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
UNQUANTIZED_APPLY = "UnquantizedFusedMoEMethod.apply"
BF16_EXPERTS = "bf16_experts_missing"
NO_FLYDSL = ("flydsl is listed because the Python that read the code has no flydsl package; the images install it "
             "(aiter's FLYDSL_VERSION), so there it is present")


def patched_site(folder: Path, root: Path = ROOT) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, commit in (("aiter", AITER_PIN), ("atom", ATOM_PIN)):
        git = ["git", "-c", "safe.directory=*", f"--git-dir={upstream_dir() / f'{name}.git'}", "archive", commit, name]
        tar = subprocess.run(git, capture_output=True, check=True).stdout  # noqa: S603
        subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)  # noqa: S603,S607
    subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(folder)], cwd=root, check=True,  # noqa: S603
                   capture_output=True)
    return folder


def route(site: Path, model: str, env: dict[str, str], out: Path, root: Path = ROOT) -> dict:
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith(("ATOM_", "AITER_"))}, **env,
               "PYTHONPATH": f"{site}{os.pathsep}{root}"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "validation.route", "--model", model, "--ck-mode", "ckfree",  # noqa: S603
                           "--json-file", str(out)], cwd=root, env=environ, capture_output=True, text=True, check=False)
    seconds = round(time.perf_counter() - start, 2)
    data = json.loads(out.read_text())
    missing = [(lr["layer"], k) for lr in data["layers"] for k in lr["kernels"] if not k["present"]]
    return {"exit": proc.returncode, "seconds": seconds, "layers": len(data["layers"]),
            "unservable": sum(1 for lr in data["layers"] if any(not k["present"] for k in lr["kernels"])),
            "modules": sorted({m["module"] for m in data["missing"]}), "unresolved": data["unresolved"],
            # (layer, ATOM or aiter function that made the call, module) triples the image lacks
            "missing_sites": len({(layer, k["site"], k["module"]) for layer, k in missing}),
            # what bf16 experts reach from ATOM's UnquantizedFusedMoEMethod.apply that the image lacks
            BF16_EXPERTS: sorted({k["module"] for _, k in missing if k["site"].endswith(UNQUANTIZED_APPLY)})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of an earlier commit of this repo")
    before = parser.parse_args().before
    env = ck_free_env()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        site = patched_site(Path(tmp) / "after")
        old = patched_site(Path(tmp) / "before", before.resolve()) if before else site
        for model in MODELS:
            rows[model] = {"before": route(old, model, env if before else {**env, SWITCH: "1"}, Path(tmp) / "b.json",
                                           before.resolve() if before else ROOT),
                           "after": route(site, model, env, Path(tmp) / "a.json")}
            print(model, json.dumps(rows[model]))
    commit = _commit(ROOT)
    what = (f"before: checkout {_commit(before)}, its patches and its route" if before
            else f"before: {SWITCH}=1, ATOM's default")
    record(ROOT / "benchmarks" / "results.json", "route", {
        "date": datetime.date.today().isoformat(), "checkout": commit, "engine": "none (no build: code read)",
        "command": "python benchmarks/route_walk.py (ATOM 181b0f46 and aiter 79366eb8 patched, the CK-free image's "
                   f"environment; {what})", "result": {"models": rows},
        **({} if importlib.util.find_spec("flydsl") else {"note": NO_FLYDSL})})
    return 0


def _commit(root: Path) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,  # noqa: S607
                          check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,  # noqa: S607
                           capture_output=True, text=True, check=True).stdout.strip()
    return f"{head}+changes" if dirty else head


if __name__ == "__main__":
    sys.exit(main())
