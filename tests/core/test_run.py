"""cleanbuild.core.run, the one subprocess entry point: bytes that are not UTF-8, timeouts that kill the whole process
group, and failures that say which command failed and why."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.core.run import CommandFailed, quote, require, run, run_logged

PY = sys.executable


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that will never reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    if status.is_file():
        try:
            return "\nState:\tZ" not in status.read_text()
        except OSError:  # it went away between the two reads
            return False
    return True


def test_output_that_is_not_utf8_is_decoded_with_replacement():
    result = run([PY, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfegfx942\\n')"], capture=True, echo=False)
    assert result.stdout == "\ufffd\ufffdgfx942\n"


def test_stderr_that_is_not_utf8_is_decoded_with_replacement():
    result = run([PY, "-c", "import sys; sys.stderr.buffer.write(b'bad \\xc3(')"], capture=True, echo=False)
    assert result.stderr == "bad \ufffd("


def test_binary_output_is_kept_as_bytes():
    result = run([PY, "-c", "import sys; sys.stdout.buffer.write(b'\\x00\\xff')"], binary=True, echo=False)
    assert (result.stdout_bytes, result.stdout) == (b"\x00\xff", "")


ENV_JSON = "import json, os; print(json.dumps(dict(os.environ)))"


def test_env_is_added_to_this_processs_environment_or_with_inherit_env_false_is_all_of_it(monkeypatch):
    monkeypatch.setenv("ATOM_BUILD_CALLERS", "1")
    added = json.loads(run([PY, "-c", ENV_JSON], env={"A": "1"}, capture=True, echo=False).stdout)
    assert (added["A"], added["ATOM_BUILD_CALLERS"]) == ("1", "1")
    alone = json.loads(run([PY, "-c", ENV_JSON], env={"A": "1"}, inherit_env=False, capture=True, echo=False).stdout)
    assert {k: v for k, v in alone.items() if k != "LC_CTYPE"} == {"A": "1"}  # CPython may coerce the C locale


def test_a_timeout_kills_the_whole_process_group():
    # The wrapper prints the pids of its two children and waits; their output goes to /dev/null so that a child
    # that survived could not keep our pipe open (the test would then fail, not hang).
    script = "sleep 300 >/dev/null 2>&1 & echo $!; sleep 300 >/dev/null 2>&1 & echo $!; wait"
    start = time.monotonic()
    result = run(["sh", "-c", script], capture=True, check=False, timeout=1, echo=False)
    pids = [int(p) for p in result.stdout.split()]
    assert (result.timed_out, result.returncode, len(pids)) == (True, -1, 2)
    assert time.monotonic() - start < 30
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if alive(p)] == []


def test_a_timeout_with_check_raises_command_failed():
    with pytest.raises(CommandFailed) as info:
        run(["sleep", "30"], capture=True, timeout=0.2, echo=False)
    assert info.value.result.timed_out is True


def test_command_failed_names_the_command_and_its_last_stderr_line():
    code = "import sys; sys.stderr.write('first line\\nthe real reason\\n'); sys.exit(3)"
    with pytest.raises(CommandFailed) as info:
        run([PY, "-c", code], capture=True, echo=False)
    assert str(info.value) == f"{quote([PY, '-c', code])} exited 3: the real reason"


def test_command_failed_falls_back_to_stdout():
    with pytest.raises(CommandFailed, match="exited 1: only stdout"):
        run([PY, "-c", "print('only stdout'); raise SystemExit(1)"], capture=True, echo=False)


def test_check_false_returns_the_exit_code():
    assert run([PY, "-c", "raise SystemExit(4)"], check=False, capture=True, echo=False).returncode == 4


def test_echo_prints_the_quoted_command(capsys):
    run([PY, "-c", "pass", "a b"], capture=True)
    assert capsys.readouterr().err == f"+ {quote([PY, '-c', 'pass', 'a b'])}\n"


def test_a_missing_binary_says_what_to_install():
    with pytest.raises(EnvironmentProblem) as info:
        require("mmdebstrap-that-is-not-there")
    assert str(info.value) == "'mmdebstrap-that-is-not-there' was not found on PATH. To fix, install mmdebstrap-that-is-not-there."


def test_a_missing_known_binary_names_its_package(monkeypatch):
    import cleanbuild.core.run

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(cleanbuild.core.run, "_beside_python", lambda name: None)  # uv installed nowhere
    with pytest.raises(EnvironmentProblem, match="'uv' was not found on PATH. To fix, pip install uv"):
        run(["uv", "--version"], echo=False)


def test_uv_installed_with_this_python_is_found_when_its_venv_is_not_activated(monkeypatch):
    """`pip install -e .` puts uv into the venv; `.venv/bin/invoke lock` without `activate` must still find it."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert run(["uv", "--version"], echo=False, capture=True).stdout.startswith("uv ")


def test_run_logged_writes_the_log_with_replacement(tmp_path):
    log = tmp_path / "build.log"
    code = run_logged([PY, "-c", "import sys; sys.stdout.buffer.write(b'step \\xff done\\n'); sys.exit(2)"], log,
                      show=False)
    assert (code, log.read_text()) == (2, "step \ufffd done\n")
