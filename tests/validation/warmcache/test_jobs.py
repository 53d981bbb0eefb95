"""The warm step's default number of compile processes: what the machine can spare when it starts."""

from __future__ import annotations

import os

import pytest

from validation import tritoncache
from validation.warmcache import jobs


class Reads:
    """A /proc file read twice: its two texts in turn."""

    def __init__(self, *texts: str):
        self.texts = list(texts)

    def read_text(self) -> str:
        return self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]


def stat(busy: int, idle: int, cpus: int = 8) -> str:
    return f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n" + "".join(f"cpu{i} 1 0 0 1 0 0 0 0 0 0\n" for i in range(cpus))


MEMINFO = "MemTotal: 33554432 kB\nMemAvailable: {kib} kB\n"


@pytest.fixture
def eight_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))


def test_the_idle_cpus_bound_the_processes(eight_cpus):
    """Over the sample, 3 of 8 CPUs' time was idle: 3 processes, with memory to spare."""
    busy_then_idle = Reads(stat(1000, 1000), stat(1000 + 500, 1000 + 300))
    assert jobs.default_jobs(busy_then_idle, Reads(MEMINFO.format(kib=64 * 2**20)), sample_s=0) == 3


def test_memory_bounds_the_processes(eight_cpus):
    all_idle = Reads(stat(0, 0), stat(0, 800))
    assert jobs.default_jobs(all_idle, Reads(MEMINFO.format(kib=int(2.5 * 2**20))), sample_s=0) == 2


def test_a_busy_machine_still_gets_one(eight_cpus):
    all_busy = Reads(stat(0, 0), stat(800, 0))
    assert jobs.default_jobs(all_busy, Reads(MEMINFO.format(kib=64 * 2**20)), sample_s=0) == 1


def test_unreadable_proc_files_leave_the_cpu_count(eight_cpus, tmp_path):
    assert jobs.default_jobs(tmp_path / "no-stat", tmp_path / "no-meminfo", sample_s=0) == 8


def test_below_four_cpus_one_process(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert jobs.default_jobs(Reads(stat(0, 0), stat(0, 800)), Reads(MEMINFO.format(kib=64 * 2**20)), sample_s=0) == 1


def test_this_machines_proc_files_read():
    assert jobs.idle_cpus(jobs.Path("/proc/stat"), 0.05) is not None
    assert jobs.available_gib(jobs.Path("/proc/meminfo")) > 0


def test_jobs_below_one_is_one_line(capsys, tmp_path):
    code = tritoncache.main(["warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--model", "qwen3-30b-a3b",
                             "--cache", str(tmp_path / "c"), "--jobs", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["python -m validation.tritoncache: error: --jobs 0: give a number of processes, 1 or more"]
