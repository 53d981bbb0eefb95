"""Every config file invoke reads is checked before invoke reads it (cleanbuild.cli.invokefiles): one line naming the file,
exit 2, no traceback. atom-build in-process through cli.main; plain `invoke` in a process (what only its real
Program shows), where tasks.py checks what invoke reads after importing it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanbuild.cli import invokefiles, main

ROOT = Path(__file__).resolve().parents[2]
BAD = {  # file name -> (content, what the one line says about it)
    "bad.yaml": ("cleanbuild: [1, 2\n", "while parsing a flow sequence"),
    "bad.json": ('{"cleanbuild": [1\n', "Expecting ',' delimiter"),
    "bad.py": ("raise RuntimeError('boom')\n", "running it raised RuntimeError: boom"),
    "module.py": ("import os\n", "os is a module, which invoke cannot keep as a value"),
    "key.json": ('{"cleanbuild": {"profil": "offline"}}\n', "unknown key cleanbuild.profil"),
    "key.py": ("cleanbuild = {'gpus': '0'}\n", "cleanbuild.gpus is now cleanbuild.gpu"),
}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    """A home of the test's own (invoke reads ~/.invoke.*) and no runtime file from the environment."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv(invokefiles.RUNTIME_ENV, raising=False)
    return folder


def atom_build(capsys, *argv: str) -> tuple[int, list[str]]:
    """(exit code, stderr lines) of `atom-build ARGV`, which must fail."""
    with pytest.raises(SystemExit) as info:
        main.main(["atom-build", *argv])
    return info.value.code, capsys.readouterr().err.splitlines()


def one_line(code: int, lines: list[str], start: str, needle: str = "") -> None:
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(start) and needle in lines[0], lines[0]


# ---- atom-build: every file, before invoke reads it -----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BAD))
def test_a_broken_runtime_file_is_one_line(capsys, tmp_path, name):
    conf = tmp_path / name
    conf.write_text(BAD[name][0])
    one_line(*atom_build(capsys, "-f", str(conf), "arch", "--arch", "gfx942"), f"error: {conf} is not a valid site "
             "config (", BAD[name][1])


@pytest.mark.parametrize("suffix", ["json", "yml", "py"])
def test_a_broken_user_file_is_one_line(capsys, home, suffix):
    conf = home / f".invoke.{suffix}"
    conf.write_text(BAD[f"bad.{'yaml' if suffix == 'yml' else suffix}"][0])
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), f"error: {conf} is not a valid site config (")


def test_a_broken_system_file_is_one_line(capsys, tmp_path, monkeypatch):
    """/etc/invoke.* (here a folder of the test's own as the prefix: the check reads what invoke would read there)."""
    monkeypatch.setattr(invokefiles, "SYSTEM", str(tmp_path / "invoke"))
    (tmp_path / "invoke.json").write_text(BAD["bad.json"][0])
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), f"error: {tmp_path / 'invoke.json'} is not a valid")


def test_a_folder_where_invoke_looks_for_the_user_file_is_one_line(capsys, home):
    (home / ".invoke.yaml").mkdir()
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), f"error: the site config {home / '.invoke.yaml'} is a "
             "folder, not a YAML file. To fix, remove that folder")


def test_only_the_user_file_invoke_reads_is_found(home):
    """invoke reads the first of .yaml, .yml, .json, .py that exists; a broken one after it is never read."""
    (home / ".invoke.yaml").write_text("cleanbuild: {}\n")
    (home / ".invoke.json").write_text(BAD["bad.json"][0])
    assert invokefiles.found(ROOT)[-2:] == [home / ".invoke.yaml", ROOT / "invoke.yaml"]


@pytest.mark.parametrize(("given", "start"), [
    ("missing.yaml", "error: the site config {} is missing, not a YAML file. To fix, name an invoke.yaml file"),
    ("", "error: the site config {} is a folder, not a YAML file. To fix, name an invoke.yaml file"),
    ("site.toml", "error: the site config {} is of a type invoke does not read (it reads .yaml, .yml, .json and .py)."),
], ids=["missing", "folder", "unknown-type"])
def test_a_runtime_file_invoke_would_skip_or_choke_on_is_one_line(capsys, tmp_path, given, start):
    path = tmp_path / given
    if given.endswith(".toml"):
        path.write_text("[cleanbuild]\n")
    one_line(*atom_build(capsys, "-f", str(path), "arch", "--arch", "gfx942"), start.format(path))


def test_an_empty_invoke_runtime_config_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv(invokefiles.RUNTIME_ENV, "")
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), "error: the site config is named but empty")


def test_a_good_python_runtime_file_reaches_the_task(capsys, tmp_path):
    conf = tmp_path / "site.py"
    conf.write_text("cleanbuild = {'progress': 'loud'}\n")  # parses; the value is the task's to refuse
    code, lines = atom_build(capsys, "-f", str(conf), "wheels", "--arch", "gfx942", "--dry-run")
    assert (code, lines) == (2, ["error: invoke.yaml: cleanbuild.progress 'loud' is not one of auto, plain, tty, "
                                 "quiet. To fix, use one of those."])


@pytest.mark.parametrize(("argv", "expected"), [
    (["invoke", "-f", "x.yaml", "plan"], "x.yaml"), (["inv", "--config=y.yml", "arch"], "y.yml"),
    (["invoke", "plan", "--arch", "gfx942"], None), (["invoke", "-fz.json", "--list"], "z.json"),
])
def test_the_runtime_flag_is_read_as_invoke_reads_it(argv, expected):
    assert invokefiles.config_flag(argv) == expected


# ---- plain invoke: tasks.py checks what invoke reads after importing it -------------------------------------

def plain_invoke(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=cwd, capture_output=True, text=True,  # noqa: S603
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, check=False)


def test_plain_invoke_refuses_a_broken_file_given_with_f(tmp_path):
    conf = tmp_path / "bad.json"
    conf.write_text(BAD["bad.json"][0])
    result = plain_invoke("-f", str(conf), "arch", "--arch", "gfx942")
    assert (result.returncode, result.stdout) == (2, "")
    one_line(2, result.stderr.splitlines(), f"error: {conf} is not a valid site config (", "Expecting ',' delimiter")


def test_plain_invoke_refuses_a_missing_file_given_with_f(tmp_path):
    result = plain_invoke("-f", str(tmp_path / "missing.yaml"), "arch", "--arch", "gfx942")
    assert (result.returncode, result.stderr) == (2, f"error: the site config {tmp_path / 'missing.yaml'} is "
                                                     "missing, not a YAML file. To fix, name an invoke.yaml file "
                                                     "(-f FILE or INVOKE_RUNTIME_CONFIG=FILE) or unset it.\n")


def test_plain_invoke_refuses_a_runtime_config_of_an_unknown_type(tmp_path):
    conf = tmp_path / "site.toml"
    conf.write_text("[cleanbuild]\n")
    result = plain_invoke("arch", "--arch", "gfx942", env={invokefiles.RUNTIME_ENV: str(conf)})
    assert (result.returncode, len(result.stderr.splitlines())) == (2, 1), result.stderr
    assert result.stderr.startswith(f"error: the site config {conf} is of a type invoke does not read")


def test_plain_invoke_refuses_a_broken_project_json_beside_tasks_py(tmp_path):
    (tmp_path / "tasks.py").write_bytes((ROOT / "tasks.py").read_bytes())
    (tmp_path / "invoke.json").write_text(BAD["bad.json"][0])
    result = plain_invoke("--list", cwd=tmp_path)
    assert (result.returncode, len(result.stderr.splitlines())) == (2, 1), result.stderr
    assert result.stderr.startswith(f"error: {tmp_path / 'invoke.json'} is not a valid site config (")
