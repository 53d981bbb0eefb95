"""benchmarks/tier_cpu.py: py-spy's raw output -> sampled seconds per kind of process and, inside the pytest-xdist
workers, per test file. The samples below are written by hand in the shape `py-spy record --subprocesses --format
raw` writes them (a child's stack after its parent's; a command line may span lines)."""

from __future__ import annotations

from tests.support.scripts import load_bench

tier_cpu = load_bench("tier_cpu")

TOP = 'process 10:"/v/bin/python -m pytest -q -n 2 tests/"'
WORKER = 'process 11:"/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))"'
RAW = "".join([
    f"{TOP};{WORKER};_main (_pytest/main.py:1);test_a (tests/cli/test_contract.py:40);helper (cleanbuild/x.py:3) 50\n",
    f"{TOP};{WORKER};_main (_pytest/main.py:1);results (test_aiter_triton.py:25);run (validation/x.py:9) 25\n",
    f"{TOP};{WORKER};_main (_pytest/main.py:1);pytest_unconfigure (pytest_timeout.py:80) 10\n",
    f'{TOP};{WORKER};process 12:"/v/bin/python -m validation --arch gfx942 --json-file /tmp/r.json";main (v.py:1) 100\n',
    f'{TOP};{WORKER};process 13:"/v/bin/python -m validation --only x";main (v.py:1) 50\n',
    f'{TOP};{WORKER};process 14:"/v/bin/python -c import sys\n\nif sys.path[0] == \'\':\n    sys.path.pop(0)\n";'
    "build (backend.py:4) 5\n",
    'process 10:"";_run_module_as_main (<frozen runpy>:198) 5\n',
])


def test_each_sample_counts_for_the_innermost_process_and_children_group_by_command():
    profile = tier_cpu.parse(RAW, rate=50)
    assert profile.seconds(profile.kinds, 5) == [("python -m validation", 3.0),
                                                 ("pytest-xdist worker (the tests themselves)", 1.7),
                                                 ("python -c import sys if", 0.1),
                                                 ("pytest itself (xdist's controller: reports, tmp_path cleanup)", 0.1)]
    assert profile.processes["python -m validation"] == {"12", "13"}


def test_inside_the_workers_time_goes_to_the_outermost_test_frame_and_pytest_keeps_the_rest():
    profile = tier_cpu.parse(RAW, rate=50)
    assert profile.seconds(profile.files, 5) == [("tests/cli/test_contract.py", 1.0), ("test_aiter_triton.py", 0.5),
                                                 ("(pytest and xdist themselves)", 0.2)]
