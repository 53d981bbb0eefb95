"""`atom-build bisect` on a dispatcher regression among a few dozen commits: how many validation runs it takes
against git bisect's bound (ceil(log2 N) + 2: good, bad, then halving), and each run's seconds on this machine.

    python benchmarks/bench_bisect.py [--commits N] [--break-at I]

A hand-made aiter-like history (tests/support/fake_aiter.py): commit 0 has the honest dispatcher, commit I reroutes
untuned shapes to torch, every other commit touches an unrelated file. The check is `gemm-hipblaslt` on the CPU
(aiter's own tuned-GEMM lookup executed from the commit's source tree, patched as the image would be). The entry
goes to benchmarks/results.json (`python benchmarks/render.py --write` then rewrites the page).
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

from cleanbuild.bisect.command import bisect_command  # noqa: E402
from cleanbuild.settings import resolve  # noqa: E402
from tests.support.fake_aiter import history, tuned_gemm  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--break-at", type=int, default=27)
    args = parser.parse_args()
    if not 0 < args.break_at < args.commits:
        parser.error("--break-at must fall inside the history (0 < I < N)")
    result = measure(args.commits, args.break_at)
    print(json.dumps(result), flush=True)
    record(ROOT / "benchmarks" / "results.json", "bisect", {
        "date": dt.date.today().isoformat(), "engine": "none (source trees, no image)",
        "command": " ".join(["python", "benchmarks/bench_bisect.py", *sys.argv[1:]]), "result": result})
    print("then: python benchmarks/render.py --write")
    return 0 if result["found"] and result["check_runs"] <= result["bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
