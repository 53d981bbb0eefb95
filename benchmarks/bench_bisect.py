"""`atom-build bisect` on a dispatcher regression among a few dozen commits: how many validation runs it takes
against git bisect's bound (ceil(log2 N) + 2: good, bad, then halving), and each run's seconds on this machine.

    python benchmarks/bench_bisect.py [--commits N] [--break-at I]
    python benchmarks/bench_bisect.py --image [--commits N] [--break-at I]   (needs the engine)

A hand-made aiter-like history (devsupport/fake_aiter.py): commit 0 has the honest dispatcher, commit I reroutes
untuned shapes to torch, every other commit touches an unrelated file. The check is `gemm-hipblaslt` on the CPU
(aiter's own tuned-GEMM lookup executed from the commit's source tree, patched as the image would be).

--image: commits made on the real aiter pin (devsupport/aiter_commits.py), commit I points solMap's hipblaslt
entry at torch_gemm, and each step builds the commit's gfx950 CK-free image (offline profile) and runs
`gemm-hipblaslt` inside it on the CPU. The pin's own image is built first (as after a release build), so the
--good step finds it by key. The commits' images are removed afterwards.

The entry goes to benchmarks/results.json (`python benchmarks/render.py --write` then rewrites the page).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.cli.settings import resolve  # noqa: E402
from cleanbuild.commands.bisect_commits import bisect_command  # noqa: E402
from devsupport.fake_aiter import history, tuned_gemm  # noqa: E402


def measure(commits: int, break_at: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        files: list[dict[str, str | bytes]] = [{} for _ in range(commits)]
        files[0] = {"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_honest")}
        files[break_at] = {"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_reroutes_to_torch")}
        repo, shas = history(Path(tmp), files)
        request = resolve({"profile": "offline", "set": [f"components.aiter.repo={repo}"], "arch": "gfx942",
                           "device": "cpu"}, None)
        out = io.StringIO()
        with redirect_stdout(out):
            code = bisect_command(request, "aiter", shas[0], shas[-1], ("gemm-hipblaslt",), as_json=True)
        data = json.loads(out.getvalue())
    seconds = [s["seconds"] for s in data["steps"]]
    return {"commits": data["commits"], "exit_code": code, "found": data["first_bad"]["sha"] == shas[break_at],
            "check_runs": data["check_runs"], "bound": math.ceil(math.log2(data["commits"])) + 2,
            "run_s_max": round(max(seconds), 1), "run_s_mean": round(sum(seconds) / len(seconds), 1),
            "total_s": data["seconds"]}


def measure_image(commits: int, break_at: int) -> dict:
    from cleanbuild.bisect import checks as checking
    from cleanbuild.bisect import imagestep
    from cleanbuild.core import engine
    from cleanbuild.images import pipeline
    from devsupport.aiter_commits import mirror_with_commits
    from devsupport.builds import forget
    from devsupport.upstream import AITER_PIN

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shas = mirror_with_commits(folder, commits - 1, break_at - 1)  # commit 0 is the pin itself
        request = resolve({"profile": "offline", "arch": "gfx950", "ck_free": True, "device": "cpu",
                           "progress": "plain", "mirror": str(folder)}, None)
        setup = imagestep.Setup(request, request.arch[0])
        checks = checking.parse("aiter", ("gemm-hipblaslt",), image=True)
        client = engine.client()
        pin = imagestep.plan_for(setup, "aiter", AITER_PIN, checks, folder / "pin")
        pipeline.run(pin, client, imagestep.BUILD, failed_report=False)
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                code = bisect_command(request, "aiter", AITER_PIN, shas[-1], ("gemm-hipblaslt",), as_json=True,
                                      image=True)
        finally:
            for sha in shas:
                plan = imagestep.plan_for(setup, "aiter", sha, checks, folder / sha)
                forget(client, [u for u in plan.units if u.key not in {v.key for v in pin.units}])
        data = json.loads(out.getvalue())
    seconds = [s["seconds"] for s in data["steps"]]
    return {"commits": data["commits"], "exit_code": code,
            "found": bool(data["first_bad"]) and data["first_bad"]["sha"] == shas[break_at - 1],
            "check_runs": data["check_runs"], "bound": math.ceil(math.log2(data["commits"])) + 2,
            "good_s": seconds[0], "build_runs_s": [round(x, 1) for x in seconds[1:]],
            "run_s_max": round(max(seconds[1:]), 1), "run_s_mean": round(sum(seconds[1:]) / len(seconds[1:]), 1),
            "total_s": data["seconds"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--break-at", type=int, default=27)
    parser.add_argument("--image", action="store_true", help="each step a real image build (needs the engine)")
    args = parser.parse_args()
    if not 0 < args.break_at < args.commits:
        parser.error("--break-at must fall inside the history (0 < I < N)")
    result = (measure_image if args.image else measure)(args.commits, args.break_at)
    print(json.dumps(result), flush=True)
    engine = "none (source trees, no image)"
    if args.image:
        from cleanbuild.core import engine as docker_engine

        engine = f"Docker {docker_engine.client().version().get('Version')}"
    record(ROOT / "benchmarks" / "results.json", "bisect_image" if args.image else "bisect", {
        "date": dt.date.today().isoformat(), "engine": engine,
        "command": " ".join(["python", "benchmarks/bench_bisect.py", *sys.argv[1:]]), "result": result})
    print("then: python benchmarks/render.py --write")
    return 0 if result["found"] and result["check_runs"] <= result["bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
