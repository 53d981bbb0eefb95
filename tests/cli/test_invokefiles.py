"""Every config file invoke reads is checked by atom-build before invoke reads it (cleanbuild.cli.invokefiles): one
line naming the file, exit 2, no traceback. In-process through cli.main. Plain `invoke` reads them its own way; what
its tasks still refuse is in tests/cli/test_tasks_py.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleanbuild.cli import invokefiles, main, program

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


def test_a_runtime_file_named_by_the_environment_of_a_type_invoke_cannot_read_is_one_line(capsys, tmp_path,
                                                                                          monkeypatch):
    conf = tmp_path / "site.toml"
    conf.write_text("[cleanbuild]\n")
    monkeypatch.setenv(invokefiles.RUNTIME_ENV, str(conf))
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), f"error: the site config {conf} is of a type invoke "
             "does not read")


@pytest.mark.parametrize("name", ["bad.json", "bad.py", "key.py"])
def test_a_broken_project_file_beside_the_tasks_is_one_line(capsys, tmp_path, monkeypatch, name):
    """This checkout's invoke.* (here a folder of the test's own as the checkout: atom-build reads the one beside its
    tasks, never the current folder's)."""
    monkeypatch.setattr(program, "REPO_ROOT", tmp_path)
    conf = tmp_path / f"invoke.{name.split('.')[1]}"
    conf.write_text(BAD[name][0])
    one_line(*atom_build(capsys, "arch", "--arch", "gfx942"), f"error: {conf} is not a valid site config (",
             BAD[name][1])
