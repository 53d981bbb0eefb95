"""tasks.py, the plain task collection invoke expects: importing it defines the tasks and nothing else, and plain
`invoke` lists and runs them. What a task decides keeps README's one line and exit code under plain invoke too (the
task's error boundary, cleanbuild.cli.signature); what needs the process or the command line is atom-build's
(cleanbuild.cli.program, tests/cli/test_atom_build.py and test_invokefiles.py). Plain invoke in a process: only its
real Program shows what it does."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanbuild.cli.collection import ns

ROOT = Path(__file__).resolve().parents[2]
TASKS_PY = ROOT / "tasks.py"


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """No user or runtime config file of this host's for the plain invoke a test starts."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)


def plain_invoke(*args: str, cwd: Path = ROOT, env: dict | None = None, code: str = "",
                 stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess:
    """`invoke ARGS` (invoke's own Program), after `code` ran in the same interpreter. Without TERM (a CI runner,
    cron, `env -i`), as invoke leaves its output buffered to the interpreter's last flush there."""
    entry = ["-c", code + "from invoke.main import program; program.run()"] if code else ["-m", "invoke"]
    environ = {k: v for k, v in os.environ.items() if k != "TERM"}
    return subprocess.run([sys.executable, *entry, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,  # noqa: S603
                          text=True, timeout=120, env={**environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          check=False)


# ---- importing tasks.py defines the tasks and nothing else ----------------------------------------------------

def test_tasks_py_imports_only_the_task_collection():
    tree = ast.parse(TASKS_PY.read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [(node.module, [a.name for a in node.names]) for node in imports if isinstance(node, ast.ImportFrom)] == [
        ("cleanbuild.cli.collection", ["ns"])]
    assert len(imports) == 1


def test_tasks_py_is_a_docstring_an_import_and_all():
    """No statement that acts at import (a handler, a hook, a check): the module body is declarations only."""
    body = ast.parse(TASKS_PY.read_text(encoding="utf-8")).body
    kinds = [type(node).__name__ for node in body]
    assert kinds == ["Expr", "ImportFrom", "Assign"]
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    assert ast.unparse(body[2]) == "__all__ = ['ns']"


IMPORT_IN_A_FRESH_INTERPRETER = """
import atexit, importlib.util, json, signal, sys
import logging  # as invoke has before it imports tasks.py: logging's import registers its own exit hook

class Argv(list):
    '''sys.argv that records every read of it.'''
    reads = []
    def __getitem__(self, i): Argv.reads.append(repr(i)); return super().__getitem__(i)
    def __iter__(self): Argv.reads.append("iter"); return super().__iter__()
    def __len__(self): Argv.reads.append("len"); return super().__len__()
    def __contains__(self, x): Argv.reads.append("in"); return super().__contains__(x)
    def index(self, *a): Argv.reads.append("index"); return super().index(*a)

before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGPIPE), sys.excepthook, atexit._ncallbacks())
sys.argv = Argv(["invoke", "-f", "SENTINEL.yaml", "--list"])
spec = importlib.util.spec_from_file_location("tasks", TASKS)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
after = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGPIPE), sys.excepthook, atexit._ncallbacks())
print(json.dumps({"same": [a is b or a == b for a, b in zip(before, after)], "argv_reads": Argv.reads,
                  "tasks": sorted(module.ns.task_names), "all": module.__all__}))
"""


def test_importing_tasks_py_changes_no_handler_and_reads_no_argv():
    """In a fresh interpreter, with a sentinel command line: SIGINT's and SIGPIPE's handlers, sys.excepthook and the
    exit hooks are what they were, sys.argv was never read, and the module holds the collection."""
    code = f"TASKS = {str(TASKS_PY)!r}\n" + IMPORT_IN_A_FRESH_INTERPRETER
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,  # noqa: S603
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    seen = json.loads(proc.stdout)
    assert seen == {"same": [True, True, True, True], "argv_reads": [], "tasks": sorted(ns.task_names),
                    "all": ["ns"]}


# ---- plain invoke lists and runs the tasks --------------------------------------------------------------------

def test_plain_invoke_lists_every_task():
    result = plain_invoke("--list", "--list-format", "json")
    assert (result.returncode, result.stderr) == (0, "")
    assert [task["name"] for task in json.loads(result.stdout)["tasks"]] == sorted(ns.task_names)


def test_plain_invoke_runs_a_task():
    result = plain_invoke("arch", "--arch", "gfx942", "--json")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout)["arch"] == "gfx942"


def test_plain_invoke_help_for_a_task_lists_its_flags():
    result = plain_invoke("--help", "plan")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("Usage: inv[oke] [--core-opts] plan [--options]") and "--ck-free" in result.stdout


# ---- what a task decides: one line and README's exit code, under plain invoke too ------------------------------

def test_a_wrong_key_in_the_invoke_yaml_beside_tasks_py_is_refused_by_the_task(tmp_path):
    """The `cleanbuild:` section reaches the task, which checks it (settings.site_config): one line, exit 2."""
    (tmp_path / "tasks.py").write_bytes(TASKS_PY.read_bytes())
    (tmp_path / "invoke.yaml").write_text("cleanbuild:\n  gpus: '0'\n")
    result = plain_invoke("arch", "--arch", "gfx942", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, "error: invoke.yaml: cleanbuild.gpus is now cleanbuild.gpu (the "
                                                     "same name as the flag). To fix, rename the key to gpu.\n")


def test_a_wrong_key_in_a_file_given_with_f_is_refused_by_the_task(tmp_path):
    conf = tmp_path / "site.json"
    conf.write_text('{"cleanbuild": {"profil": "offline"}}\n')
    result = plain_invoke("-f", str(conf), "arch", "--arch", "gfx942")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: invoke.yaml: unknown key cleanbuild.profil. To fix, use one of: ")
    assert len(result.stderr.splitlines()) == 1


def test_a_missing_file_given_with_f_is_skipped_as_invoke_skips_it(tmp_path):
    """README: plain invoke reads its config files its own way (atom-build refuses a missing -f FILE, exit 2)."""
    result = plain_invoke("-f", str(tmp_path / "missing.yaml"), "arch", "--arch", "gfx942", "--json")
    assert (result.returncode, result.stderr) == (0, "")


def test_a_tasks_output_into_a_closed_pipe_is_quiet():
    """The task's boundary checks its output: 141 and no line (invoke's own help and lists are invoke's)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = plain_invoke("arch", "--arch", "gfx942", "--json", stdout=writer)
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (141, "")


INTERRUPT_IN_THE_TASK = """
import importlib.abc, os, signal, sys
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "cleanbuild.commands.sources":  # Ctrl-C in lock's body, which imports it when it runs
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_in_a_task_is_exit_130_and_one_line():
    result = plain_invoke("lock", "--check", code=INTERRUPT_IN_THE_TASK)
    assert (result.returncode, result.stdout) == (130, "")
    assert result.stderr.startswith("error: interrupted") and len(result.stderr.splitlines()) == 1, result.stderr
