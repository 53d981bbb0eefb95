"""The front door: `atom-build` (cleanbuild.cli.main.main), its help for every task, the options table it is built from,
and Ctrl-C while it imports. Usage in-process through main(); a process only for what a process proves (the
console script's exit code and signals)."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanbuild.cli import main, options
from cleanbuild.cli.collection import ns
from cleanbuild.cli.settings import resolve, site_config
from cleanbuild.core.errors import UsageError
from cleanbuild.request.build import Request

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted(ns.task_names)


def atom_build(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main.main(["atom-build", *argv])
        raise SystemExit(0)  # invoke's run() returns after a task that succeeded
    out = capsys.readouterr()
    return info.value.code or 0, out.out, out.err


def flags_of(name: str) -> list[str]:
    return [options.flag_name(a.name.rstrip("_")) for a in ns[name].get_arguments() if not a.positional]  # invoke: open_ -> --open


@pytest.mark.parametrize("name", TASKS)
def test_task_help_exits_0_and_lists_every_flag(capsys, name):
    code, out, err = atom_build(capsys, name, "--help")
    assert (code, err) == (0, "")
    assert [f for f in flags_of(name) if f not in out] == []
    assert f"atom-build [--core-opts] {name} " in out


@pytest.mark.parametrize("name", ["audit", "promote", "report", "smoke", "tag", "verify", "validate"])
def test_help_after_a_positional_task_is_help_not_its_argument(capsys, name):
    code, out, _ = atom_build(capsys, name, "-h")
    assert code == 0 and "Docstring:" in out


def test_the_console_script_as_a_process_prints_help_for_a_positional_task():
    proc = subprocess.run([sys.executable, "-c", "from cleanbuild.cli.main import main; main()", "audit", "--help"],  # noqa: S603
                          cwd="/", env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith("Usage: atom-build [--core-opts] audit [--options]")
    assert "--run-kernels" in proc.stdout


def test_a_parse_error_is_exit_2_and_one_line(capsys):
    code, _, err = atom_build(capsys, "plan", "--nosuch")
    assert code == 2 and err.startswith("error: the command line failed to parse because No idea what '--nosuch'")
    assert len(err.splitlines()) == 1


def test_validate_is_a_task_and_checks_the_image_before_the_engine(capsys):
    code, _, err = atom_build(capsys, "validate", "--image", "Bad Ref!")
    assert (code, err.splitlines()) == (2, ["error: validate IMAGE 'Bad Ref!' is not an image reference. To fix, "
                                            "pass NAME[:TAG], REPO@sha256:DIGEST (64 hex) or an image ID."])


@pytest.mark.parametrize("task", ["validate", "smoke", "tag"])
def test_an_empty_positional_image_is_named_as_the_argument(capsys, task):
    """`atom-build validate ''`: the user typed no flag, so the message names the argument, not `--image`."""
    code, _, err = atom_build(capsys, task, "", *(["/"] if task == "smoke" else []))
    assert (code, err.splitlines()[0]) == (2, f"error: {task} IMAGE '' is not an image reference. To fix, pass "
                                              "NAME[:TAG], REPO@sha256:DIGEST (64 hex) or an image ID.")


def test_an_old_invoke_yaml_key_is_refused_naming_the_new_one(capsys, tmp_path):
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild:\n  container_user: '1000'\n")
    code, _, err = atom_build(capsys, "-f", str(conf), "arch", "--arch", "gfx942")
    assert code == 2 and "cleanbuild.container_user is now cleanbuild.user_id" in err


@pytest.mark.parametrize("old,new", sorted(options.RENAMED.items()))
def test_old_keys_are_refused_with_the_new_name(old, new):
    with pytest.raises(UsageError, match=f"^invoke.yaml: cleanbuild.{old} is now cleanbuild.{new} .* To fix, rename "
                                         f"the key to {new}."):
        site_config({old: "0"})


def test_a_broken_site_config_is_one_line_and_exit_2(capsys, tmp_path):
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild: [\n")
    code, _, err = atom_build(capsys, "-f", str(conf), "arch", "--arch", "gfx942")
    assert code == 2 and err.startswith(f"error: {conf} is not a valid site config") and len(err.splitlines()) == 1


def test_a_flag_and_its_invoke_yaml_key_share_one_name():
    both = [o for o in options.OPTIONS if o.flag and o.config]
    assert {o.flag_name for o in both} == {"--" + o.key.removeprefix("cleanbuild.").replace("_", "-") for o in both}
    for name in TASKS:  # every task flag that names an option takes it by the option's own name
        params = {a.name for a in ns[name].get_arguments()}
        assert all(options.BY_NAME[p].flag for p in params if p in options.BY_NAME), name


def test_the_request_has_one_field_per_option():
    fields = set(Request.__dataclass_fields__)
    assert fields == {o.name for o in options.OPTIONS if o.name != "set"} | {"profile_from"}  # --set: in overrides


def test_an_environment_variable_sits_between_the_flag_and_invoke_yaml():
    opt = options.Option("registry", "test", "atom-build", env="ATOM_BUILD_TEST_REGISTRY")
    env = {"ATOM_BUILD_TEST_REGISTRY": "env/x"}
    assert options.given(opt, {"registry": "flag/x"}, {"registry": "conf/x"}, env).value == "flag/x"
    assert options.given(opt, {}, {"registry": "conf/x"}, env) == options.Given("env/x", "$ATOM_BUILD_TEST_REGISTRY")
    assert options.given(opt, {}, {"registry": "conf/x"}, {}).where == "invoke.yaml: cleanbuild.registry"


def test_the_gpu_flag_and_key_reach_the_request_under_one_name():
    assert resolve({}, {"gpu": "0,2", "user_id": 1000}).gpu == (0, 2)
    assert resolve({"user_id": "7:7"}, {"user_id": 1000}).user_id == "7:7"


IMPORT_INTERRUPT = """
import importlib.abc, os, signal, sys
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "cleanbuild.cli.collection":  # Ctrl-C while the tasks module is still importing
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_while_the_tasks_import_is_exit_130_and_one_line():
    """atom-build's (cleanbuild.cli.main); plain invoke's is its own (README: Exit codes), tasks.py installs nothing."""
    entry = "from cleanbuild.cli.main import main; main()"
    proc = subprocess.run([sys.executable, "-c", IMPORT_INTERRUPT + entry, "lock", "--check"],  # noqa: S603
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.startswith("error: interrupted (Ctrl-C).") and len(proc.stderr.splitlines()) == 1


def test_what_follows_a_standalone_double_dash_reaches_validate(capsys, monkeypatch):
    from cleanbuild.commands import existing

    seen = {}

    def validate(image, request, *, rest, dest):
        seen.update(image=image, rest=rest, device=request.device, dest=dest)
        return 0

    monkeypatch.setattr(existing, "validate", validate)
    code, _, err = atom_build(capsys, "validate", "--image", "atom-build/clean:x", "--json-file", "v.json", "--",
                              "--only", "arch-consistency")
    assert (code, err) == (0, "")
    assert seen == {"image": "atom-build/clean:x", "rest": ("--only", "arch-consistency"), "device": "cuda",
                    "dest": Path("v.json")}


# ---- standard output whose reader went away (`| head -1`): quiet, 141 ----------------------------------------

def into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess:
    """A process whose standard output is a pipe nobody reads any more: its reader is closed before it starts, so
    the first write that reaches the pipe fails (EPIPE), every time; `| head -1` gives the same, some of the time."""
    reader, writer = os.pipe()
    os.close(reader)
    # Without TERM (a CI runner, cron, `env -i`) invoke leaves its output buffered to the interpreter's last flush.
    env = {k: v for k, v in os.environ.items() if k != "TERM"}
    try:
        return subprocess.run([sys.executable, *ATOM_BUILD, *argv], cwd=ROOT, stdout=writer, stderr=subprocess.PIPE,  # noqa: S603
                              text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT)}, check=False)
    finally:
        os.close(writer)


ATOM_BUILD = ["-c", "from cleanbuild.cli.main import main; main()"]


@pytest.mark.parametrize("argv", [("--help",), ("plan", "--help"), ("audit", "-h"), ("--list",), ("--version",),
                                  ("arch", "--arch", "gfx942", "--json")])
def test_atom_build_into_a_closed_pipe_is_quiet(argv):
    result = into_a_closed_pipe(*argv)
    assert (result.returncode, result.stderr) == (141, "")


def test_help_into_a_full_device_is_one_line_and_exit_3():
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, *ATOM_BUILD, "--help"], cwd=ROOT, stdout=full,  # noqa: S603
                                stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (result.returncode, result.stderr) == (3, "error: writing to standard output failed because No space left "
                                                     "on device. To fix, send the output to a file or a device with "
                                                     "space (or a pipe that stays open).\n")


@pytest.mark.slow
def test_help_into_head_is_quiet_in_20_of_20_runs():
    """README's done-when, as a user types it: `atom-build --help | head -1`, twenty times (pipes, no shell). The
    twenty pipelines run at once: each is its own pair of processes, so each run is the one a user types."""

    def pipeline() -> tuple[bool, bytes, bool]:
        atom = subprocess.Popen([sys.executable, *ATOM_BUILD, "--help"], cwd=ROOT, stdout=subprocess.PIPE,  # noqa: S603
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        head = subprocess.run(["head", "-1"], stdin=atom.stdout, capture_output=True, check=True)  # noqa: S607
        atom.stdout.close()
        end = (atom.wait(timeout=120) in (0, 141), atom.stderr.read(), head.stdout.startswith(b"Usage:"))
        atom.stderr.close()
        return end

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        ends = list(pool.map(lambda _: pipeline(), range(20)))
    assert ends == [(True, b"", True)] * 20
