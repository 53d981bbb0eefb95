"""How many processes the warm step compiles in when not told (--jobs): what the machine can spare now.

Each process imports torch, aiter and Triton before it compiles (a warm with nothing to compile, gfx942 CK: 2.1 s of
CPU; peak memory 0.42 GiB) and a call's kernels can repeat in two processes, so a second process pays only where
cores are idle. Measured on 2 CPUs, `/usr/bin/time python -m validation.tritoncache warm --arch gfx950 --ck-mode
ckfree --model qwen3-30b-a3b --tp 1 8 --aiter-src PATCHED_PIN/aiter --cache DIR --manifest FILE --jobs N`: 11.0 s in
one process, 13.0 s (20.5 s of CPU) in two; on the device tool's 16 CPUs, 500 calls took 65.7 s in 16
(benchmarks/README.md, the Triton cache on a GPU).
A matrix build warms its candidates at once, each in its own container: every warm step counts the CPUs idle at its
start (host-wide /proc/stat, as `make -l` reads the load) and the memory available, so four of them share the
machine instead of each taking all of it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MIN_CPUS = 4  # below this, one process (the measurement above)
GIB_PER_JOB = 1.0  # a compile process's peak (0.42 GiB measured) with room


def default_jobs(stat: Path = Path("/proc/stat"), meminfo: Path = Path("/proc/meminfo"), sample_s: float = 0.25) -> int:
    cpus = len(os.sched_getaffinity(0))
    if cpus < MIN_CPUS:
        return 1
    idle = idle_cpus(stat, sample_s)
    memory = available_gib(meminfo)
    limits = [cpus] + ([round(idle)] if idle is not None else []) + ([int(memory / GIB_PER_JOB)] if memory else [])
    return max(1, min(limits))


def idle_cpus(stat: Path, sample_s: float) -> float | None:
    """CPUs idle over sample_s (the machine's, not this container's), or None where /proc/stat cannot be read."""
    first = _cpu_times(stat)
    time.sleep(sample_s)
    second = _cpu_times(stat)
    if first is None or second is None:
        return None
    (busy0, idle0, n), (busy1, idle1, _) = first, second
    total = (busy1 - busy0) + (idle1 - idle0)
    return n * (idle1 - idle0) / total if total > 0 else float(n)


def _cpu_times(stat: Path) -> tuple[int, int, int] | None:
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    fields = [int(x) for x in lines[0].split()[1:]]  # "cpu  user nice system idle iowait irq softirq steal ..."
    n = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle, idle, n


def available_gib(meminfo: Path) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None
