"""The payload reader's CPU over one tree, this checkout's validation/ against another's, in alternating rounds
(numbers, not assertions: not a test).

    python benchmarks/payload_scan.py --before CLONE [--rounds 3] [--no-record]

The tree: aiter's hsa/ at the offline profile's pin (2,978 files, read from the mirror, $ATOM_BUILD_MIRROR or
../shared/upstream) under an image-like site-packages, beside this interpreter's own site-packages (torch, triton:
the bulk of an image's /opt/venv). Each round scans it once with each checkout's `validation.gpucode.scan` in a
process of its own (before first in odd rounds), and checks that both give the same manifest and the same pieces.
Records the "payload_scan" row: each side's median CPU seconds of the scan alone (time.process_time), files read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]
from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.upstream import profiles  # noqa: E402

# Run with the checkout first on sys.path: its validation/ is the one timed. Prints one JSON object.
PROBE = """
import hashlib, json, sys, time
from pathlib import Path
try:
    from validation.gpucode.scan import manifest, scan
except ImportError:  # a checkout from before validation/ had its layers (issue 56)
    from validation.payload.scan import manifest, scan
root, tops = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
start = time.process_time()
result = scan(tops, root=root)
cpu = time.process_time() - start
pieces = sorted((f.path, f.owner, f.family, f.folder_arch or "", f.ours, f.piece.arch) for f in result.found)
print(json.dumps({"cpu_s": cpu, "files": result.files_read, "found": len(result.found),
                  "manifest": hashlib.sha256(json.dumps(manifest(result, target="gfx942", roots=[]),
                                                        sort_keys=True).encode()).hexdigest(),
                  "pieces": hashlib.sha256(json.dumps(pieces).encode()).hexdigest()}))
"""


def tree(dest: Path) -> list[Path]:
    """aiter's hsa/ under an image-like site-packages in dest; returns the folders to scan."""
    mirror = Path(os.environ.get("ATOM_BUILD_MIRROR") or ROOT.parent / "shared" / "upstream") / "aiter.git"
    site = dest / "opt" / "venv" / "lib" / "python3.12" / "site-packages" / "aiter_meta"
    site.mkdir(parents=True)
    pin = profiles.load("offline").component("aiter").ref
    archive = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={mirror}", "archive", pin, "hsa"],  # noqa: S603,S607
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(site)], input=archive, check=True)  # noqa: S603,S607
    return [dest / "opt", Path(sysconfig.get_paths()["purelib"])]


def scan_once(checkout: Path, root: Path, tops: list[Path]) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, str(root), *map(str, tops)], capture_output=True, text=True,  # noqa: S603
                          check=True, env={**os.environ, "PYTHONPATH": str(checkout)}, cwd=checkout)
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a clone at the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only; results.json unchanged")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": ROOT}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        tops = tree(Path(tmp))
        for n in range(args.rounds):
            for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                runs[side].append(scan_once(sides[side], Path(tmp), tops))
                print(f"round {n + 1} {side}: {runs[side][-1]['cpu_s']:.3f} s CPU, {runs[side][-1]['files']} files",
                      flush=True)
        shutil.rmtree(Path(tmp) / "opt")
    answers = {(r["files"], r["found"], r["manifest"], r["pieces"]) for side in runs.values() for r in side}
    if len(answers) != 1:
        raise SystemExit(f"the two checkouts read the tree differently: {sorted(answers)}")
    result = {side: {"checkout": _commit(sides[side]), "cpu_s": [round(r["cpu_s"], 3) for r in rs],
                     "median_cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 3)} for side, rs in runs.items()}
    files, found = runs["after"][0]["files"], runs["after"][0]["found"]
    result.update({"files_read": files, "pieces": found, "same_answer": True})
    print(json.dumps(result, indent=1))
    if not args.no_record:
        record(HERE / "results.json", "payload_scan", {
            "date": dt.date.today().isoformat(), "checkout": result["after"]["checkout"],
            "engine": "none (the reader runs on the host)",
            "command": f"python benchmarks/payload_scan.py --before CLONE --rounds {args.rounds}", "result": result})
    return 0


def _commit(checkout: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True,  # noqa: S603,S607
                          check=False).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
