"""Does the caller's environment reach the stand-in's tar? (a measurement, not a test: it needs mmdebstrap and the
Debian archive, and takes about a minute a checkout).

    python benchmarks/standin_env.py [--before CHECKOUT] [--no-record]

Makes the offline profile's stand-in tar with cleanbuild.images.standin.make twice in this checkout: once with
PYTHONDONTWRITEBYTECODE unset in the caller's environment (as nox's test sessions run), once with it set to 1 (as a
shell here has it). --before CHECKOUT does the same in another checkout first (its own cleanbuild, in a process of its
own), so before and after come from one run and one archive state. Each tar's sha256 and how its .pyc are checked
(standin.pyc_checks, read with this checkout's reader) are printed and recorded in results.json ("standin_env").
Until plan.STANDIN_ENV the two tars differed (2026-12-05: CI's fresh clone failed on it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from results_file import record  # noqa: E402  (benchmarks/, the script's folder)

from cleanbuild.images import standin  # noqa: E402

# Run in the measured checkout (cwd and PYTHONPATH): the offline profile's stand-in, made into the folder argv[1].
MAKE = """
import json, sys
from pathlib import Path
from cleanbuild.cli.settings import resolve
from cleanbuild.images import standin
from cleanbuild.images.plan import make_plan
asked = resolve({"profile": "offline", "arch": "gfx950", "ck_free": True, "device": "cpu"}, None)
spec = make_plan(asked.profile, asked.build(asked.arch[0])).prepare.standin
print(json.dumps(standin.make(spec, Path(sys.argv[1]))["tar_sha256"]))
"""
SETTINGS = (("unset", None), ("set", "1"))  # the caller's PYTHONDONTWRITEBYTECODE


def commit(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,  # noqa: S603,S607
                          text=True, check=True).stdout.strip()


def make(checkout: Path, value: str | None, folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": str(checkout)} | ({"PYTHONDONTWRITEBYTECODE": value} if value else {})
    proc = subprocess.run([sys.executable, "-c", MAKE, str(folder)], cwd=checkout, env=env, capture_output=True,  # noqa: S603
                          text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"standin.make failed in {checkout}: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return {"tar_sha256": json.loads(proc.stdout.splitlines()[-1]),
            "pyc": standin.pyc_checks(folder / "context" / "base.tar")}


def measure(checkout: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="standin-env-") as tmp:
        runs = {name: make(checkout, value, Path(tmp) / name) for name, value in SETTINGS}
    for name, run in runs.items():
        print(f"{checkout} ({commit(checkout)}) PYTHONDONTWRITEBYTECODE {name}: {run['tar_sha256']} {run['pyc']}",
              flush=True)
    return {"checkout": commit(checkout), **runs, "identical": runs["unset"]["tar_sha256"] == runs["set"]["tar_sha256"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout, measured first the same way")
    parser.add_argument("--no-record", action="store_true", help="print only; leave results.json as it is")
    args = parser.parse_args(argv)
    result = {**({"before": measure(args.before.resolve())} if args.before else {}), "after": measure(ROOT)}
    if not args.no_record:
        command = "python benchmarks/standin_env.py" + (f" --before CLONE-AT-{result['before']['checkout']}"
                                                        if args.before else "")
        record(HERE / "results.json", "standin_env",
               {"date": dt.date.today().isoformat(), "checkout": result["after"]["checkout"], "command": command,
                "engine": "none (mmdebstrap and the Debian archive)", "result": result})
    return 0 if result["after"]["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
