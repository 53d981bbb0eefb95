"""Where the everyday tier's CPU goes, the processes its tests start included (numbers, not assertions: not a test).

    python benchmarks/tier_cpu.py [--rate 50] [--top 12] [--raw FILE] [--no-record]

Runs `pytest -m "not docker"` with the arguments of this checkout's `nox -s tests` (noxfile.py's TIER list) twice:
alone, for its wall and the CPU seconds of every process it starts (user + sys, from the kernel's accounting), then
under py-spy, which samples the pytest workers and every Python process a test starts (`python -m validation`,
bisect's warm process, nested pytest runs). Prints and records in results.json ("tier_cpu") the sampled seconds per
kind of process, and inside the workers per test file. Samples see Python processes only: git, tar and uv's own binary are
in the CPU seconds, not in the samples. cProfile sees one process; on two cores half of the tier's CPU is in
processes the tests start.

py-spy is a PyPI wheel (`pip install py-spy`) and needs ptrace: root, or kernel.yama.ptrace_scope 0. py-spy pauses
each process to sample it: the sampled run is slower than the tier alone (the row records both walls) and its
samples sum to more than the tier's CPU seconds (a process that waits for a core is not idle to py-spy: 20
processes started at once weigh more than their CPU); read them as shares. Not --nonblocking: with it, a run put
a quarter of the tier's samples on short `python -c` processes that were a few seconds in every pausing run.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]  # HERE too when a test loads this file by its path

from bench_unit_tier import tier_args  # noqa: E402  (benchmarks/, the script's folder)
from results_file import record  # noqa: E402

WORKER = "exec(eval(sys.stdin.readline()))"  # how execnet starts a pytest-xdist worker
ROOT_KIND = "pytest itself (xdist's controller: reports, tmp_path cleanup)"  # py-spy read its command line as ""
# A record of py-spy's raw output: "process PID:"CMDLINE";frame;frame;... COUNT". A command line may hold newlines
# (python -c 'code'), so a record ends only where the next one begins.
RECORD = re.compile(r"(process \d+:.*?) (\d+)\n(?=process \d+:|\Z)", re.S)
PROCESS = re.compile(r'process (\d+):"(.*?)"$', re.S)
# The outermost frame in a test file or tests/ helper: py-spy names a file by its path under sys.path's entry.
TEST_FRAME = re.compile(r"\S+ \(((?:tests/\S*?)?test_\w+\.py|tests/\S+?\.py):\d+\)")


@dataclass
class Profile:
    """Sampled seconds: per kind of process, and inside the workers per test file."""

    rate: int
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)
    files: collections.Counter[str] = field(default_factory=collections.Counter)
    processes: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))

    def seconds(self, counter: collections.Counter[str], top: int) -> list[tuple[str, float]]:
        return [(name, round(n / self.rate, 1)) for name, n in counter.most_common(top)]


def kind(cmdline: str) -> str:
    """A process's command line -> the kind it is counted under: the worker, or the child's command without its
    paths and arguments' values (`python -m validation`, `git`-less: py-spy samples Python only)."""
    words = cmdline.split()
    if not words:  # as py-spy read the tier's own pytest process
        return "(no command line read)"
    if WORKER in " ".join(words):
        return "pytest-xdist worker (the tests themselves)"
    if "-m" in words[:-1]:
        return "python -m " + words[words.index("-m") + 1]
    if "-c" in words[:-1]:
        return "python -c " + " ".join(words[words.index("-c") + 1:][:3])[:48]
    return " ".join(Path(w).name if "/" in w else w for w in words[:2])[:60]


def parse(raw: str, rate: int) -> Profile:
    """py-spy's raw (collapsed) output -> a Profile. Each sample is counted for the innermost process it names."""
    profile = Profile(rate)
    for stack, count in RECORD.findall(raw):
        processes = re.split(r";(?=process \d+:)", stack)
        head, _, frames = processes[-1].partition('";')
        found = PROCESS.match(head + '"')
        if not found:
            continue
        pid, cmdline = found.group(1), " ".join(found.group(2).split())
        name = ROOT_KIND if len(processes) == 1 else kind(cmdline)
        profile.kinds[name] += int(count)
        profile.processes[name].add(pid)
        if name.startswith("pytest-xdist worker"):
            test = TEST_FRAME.search(frames)
            profile.files[test.group(1) if test else "(pytest and xdist themselves)"] += int(count)
    return profile


def tier(prefix: list[str], extra: tuple[str, ...] = (), env_extra: dict[str, str] | None = None,
         ) -> tuple[float, float, str]:
    """The tier, after prefix (py-spy's argv, or nothing) and with pytest's extra arguments: (wall seconds, CPU
    seconds of every process it started, prefix included, pytest's summary line)."""
    env = {**os.environ, "ATOM_BUILD_MIRROR": os.environ.get("ATOM_BUILD_MIRROR", str(ROOT.parent / "shared" / "upstream")),
           **(env_extra or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as nox -s tests runs it (noxfile.BYTECODE)
    argv = [*prefix, sys.executable, "-m", "pytest", "-m", "not docker", *extra, *tier_args(ROOT)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in proc.stdout.splitlines() if re.search(r"\d+ passed.* in [\d.]+s", ln)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the tier failed (exit {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, cpu, lines[-1].strip("= ")


def spy_prefix(rate: int, raw: Path) -> list[str]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).is_file():
        raise SystemExit("py-spy is not installed: pip install py-spy (it samples the tier's child processes too)")
    return [spy, "record", "--subprocesses", "--rate", str(rate), "--format", "raw", "-o", str(raw), "--"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=50, help="samples a second per process (default 50)")
    parser.add_argument("--top", type=int, default=12, help="rows per table (default 12)")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw output here")
    parser.add_argument("--no-record", action="store_true", help="print only; results.json unchanged")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = args.raw or Path(tmp) / "tier.raw"
        prefix = spy_prefix(args.rate, raw)
        wall, cpu, summary = tier([])  # alone first: the sampler's own CPU is in no number but the samples' run
        spy_wall, _, spy_summary = tier(prefix)
        profile = parse(raw.read_text(errors="replace"), args.rate)
    sampled = round(sum(profile.kinds.values()) / args.rate, 1)
    print(f"alone: {summary}; wall {wall:.1f} s, CPU {cpu:.1f} s (user + sys of every process)")
    print(f"under py-spy: {spy_summary}; wall {spy_wall:.1f} s, sampled {sampled} s")
    kinds = [(name, secs, len(profile.processes[name])) for name, secs in profile.seconds(profile.kinds, args.top)]
    for name, secs, count in kinds:
        print(f"{secs:7.1f} s  {count:3d} x  {name}")
    print("inside the workers, by test file:")
    files = profile.seconds(profile.files, args.top)
    for name, secs in files:
        print(f"{secs:7.1f} s  {name}")
    if not args.no_record:
        record_tier_row("tier_cpu", f"python benchmarks/tier_cpu.py --rate {args.rate} --top {args.top}", {
            "summary": summary, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "sampled_s": sampled,
            "spy_summary": spy_summary, "spy_wall_s": round(spy_wall, 1), "kinds": [list(k) for k in kinds],
            "files": [list(f) for f in files]})
    return 0


def record_tier_row(name: str, command: str, result: dict) -> None:
    """results.json's row `name` for a run of the everyday tier at this checkout (the tier needs no engine)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,  # noqa: S603,S607
                            check=False).stdout.strip()
    record(HERE / "results.json", name, {"date": dt.date.today().isoformat(), "checkout": commit,
                                         "engine": "none (the everyday tier needs none)", "command": command,
                                         "result": result})


if __name__ == "__main__":
    sys.exit(main())
