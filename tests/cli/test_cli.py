"""The tasks as a user runs them: one line on stderr and a fixed exit code for bad input.

Usage errors run in-process through atom-build's Program (cleanbuild.cli.program) and the real namespace. A few tests
start a process, for what only a process shows: the exit code of `atom-build` and of `python -m invoke` in this
checkout, and invoke.yaml problems, which atom-build checks before invoke reads the file."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanbuild.cli.program import AtomBuild
from tests.support.upstream import AITER_HEAD, AITER_PR_HEAD, ATOM_HEAD

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("no_engine")  # a plan's unit states: "no engine", never this host's engine


@pytest.fixture(autouse=True)
def no_site_config(monkeypatch):
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)


def program() -> AtomBuild:
    return AtomBuild()


def fails(capsys, *argv) -> tuple[int, list[str]]:
    """(exit code, non-empty stderr lines) of a task that must fail."""
    with pytest.raises(SystemExit) as info:
        program().run(["invoke", *argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return info.value.code, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("argv,needle", [
    (("arch", "--arch", "gfx1100"), "error: architecture 'gfx1100' is not supported. To fix, pass --arch gfx942|gfx950."),
    (("arch", "--arch", "gfx941"), "error: gfx941 is a pre-release MI300 target"),
    (("plan", "--arch", "gfx942", "--profile", "nope"), "error: profile 'nope' not found"),
    (("plan", "--arch", "gfx942", "--set", "oops"), "error: --set 'oops' is not KEY=VALUE"),
    (("plan", "--arch", "gfx942", "--set", "components.aiter.prebuild_kernels=maybe"),
     "error: override components.aiter.prebuild_kernels='maybe' is not true or false"),
    (("plan", "--arch", "gfx942", "--set", "disk_gib=abc"), "error: override disk_gib='abc' is not a number"),
    (("plan", "--arch", "gfx942", "--set", "components.aiter.colour=red"),
     "error: override 'components.aiter.colour' does not name a profile entry"),
    (("plan", "--arch", "gfx942", "--ca-bundle", "/no/such.pem"), "error: --ca-bundle /no/such.pem is not a file"),
    (("plan", "--arch", "gfx942", "--model", "/no/such/model"), "error: --model /no/such/model is not a folder"),
    (("plan", "--arch", "gfx942,gfx1100"), "error: architecture 'gfx1100' is not supported"),
    (("patch",), "error: give exactly one of --folder DIR or --image TAG."),
    (("bisect", "atom", "--image", "--ck-free", "--good", "a", "--bad", "b", "--arch", "gfx950"),
     "error: bisect atom --image failed because every check an image runs validates aiter's code"),
    (("patch", "--folder", "a", "--image", "b"), "error: give exactly one of --folder DIR or --image TAG."),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, lines = fails(capsys, *argv)
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(needle), lines[0]


def test_patch_of_a_folder_that_does_not_exist_is_bad_input(capsys, tmp_path):
    code, lines = fails(capsys, "patch", "--folder", str(tmp_path / "nowhere"))
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(f"error: --folder {tmp_path / 'nowhere'} is not a folder")


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(SystemExit) as info:
        program().run(["invoke", "arch", "--arch", "gfx1100", "--debug"])
    assert info.value.code == 2 and "Traceback" in capsys.readouterr().err


def test_arch_prints_facts_as_json(capsys):
    program().run(["invoke", "arch", "--arch", "gfx942", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (data["fp8_dtype"], data["fp8_max"], data["lds_per_cu_kib"]) == ("float8_e4m3fnuz", 240, 64)


def plans_printed(text: str) -> list[dict]:
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
        while at < len(text) and text[at].isspace():
            at += 1
    return docs


def test_plan_for_two_archs_gives_two_plans(capsys):
    program().run(["invoke", "plan", "--arch", "gfx942,gfx950", "--json"])
    docs = plans_printed(capsys.readouterr().out)
    assert [(d["arch"], d["build_args"]["clean"]["GPU_ARCH"]) for d in docs] == [("gfx942", "gfx942"),
                                                                                ("gfx950", "gfx950")]


def test_plan_shows_the_commands_build_clean_runs(capsys):
    program().run(["invoke", "plan", "--arch", "gfx950", "--ck-free", "--json"])
    data = plans_printed(capsys.readouterr().out)[0]
    assert (data["ck_mode"], data["build_args"]["wheels"]["ENABLE_CK"]) == ("ckfree", "0")
    assert data["commands"][0].startswith("docker buildx build ")


def test_typed_set_reaches_the_plan(capsys):
    program().run(["invoke", "plan", "--arch", "gfx942", "--json", "--set", "components.aiter.prebuild_kernels=0"])
    assert plans_printed(capsys.readouterr().out)[0]["build_args"]["wheels"]["PREBUILD_KERNELS"] == "0"


def test_flag_beats_site_config_beats_profile(capsys, tmp_path, upstream):
    """Commits the repositories have (plan resolves each ref as the build does), none of them the profile's pin."""
    conf = tmp_path / "site.yaml"
    conf.write_text(f"cleanbuild:\n  overrides:\n    components.aiter.ref: {AITER_PR_HEAD}\n"
                    f"    components.atom.ref: {ATOM_HEAD}\n")
    program().run(["invoke", "-f", str(conf), "plan", "--arch", "gfx942", "--json",
                   "--set", f"components.aiter.ref={AITER_HEAD}"])
    args = plans_printed(capsys.readouterr().out)[0]["build_args"]["wheels"]
    assert (args["AITER_REF"], args["ATOM_REF"]) == (AITER_HEAD, ATOM_HEAD)


@pytest.mark.parametrize("task", [("wheels", "--arch", "gfx942", "--dry-run"),
                                  ("audit", "some/image:tag", "--arch", "gfx942")])  # audit: the request too
def test_bad_site_config_value_is_named_by_its_invoke_yaml_key(capsys, tmp_path, task):
    """A task with a --progress flag, not given (or, audit, without one): the bad value is invoke.yaml's, and the
    message says so, before any engine call."""
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild:\n  progress: loud\n")
    code, lines = fails(capsys, "-f", str(conf), *task)
    assert (code, lines) == (2, ["error: invoke.yaml: cleanbuild.progress 'loud' is not one of auto, plain, tty, "
                                 "quiet. To fix, use one of those."])


def test_bad_progress_flag_is_named_by_the_flag(capsys, tmp_path):
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild:\n  progress: plain\n")
    code, lines = fails(capsys, "-f", str(conf), "wheels", "--arch", "gfx942", "--progress", "loud", "--dry-run")
    assert (code, lines) == (2, ["error: --progress 'loud' is not one of auto, plain, tty, quiet. To fix, use one "
                                 "of those."])


def test_bad_site_config_value_is_refused_by_a_task_without_that_flag(capsys, tmp_path):
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild:\n  gpu: first\n")
    code, lines = fails(capsys, "-f", str(conf), "plan", "--arch", "gfx942")
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith("error: invoke.yaml: cleanbuild.gpu 'first' is not a list of GPU indices. To fix")


def test_audit_parses_its_arch_through_the_request(capsys):
    code, lines = fails(capsys, "audit", "some/image:tag", "--arch", "gfx9000")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "gfx9000" in lines[0]


def test_a_broken_file_given_with_f_is_refused_before_invoke_reads_it(capsys, tmp_path):
    conf = tmp_path / "broken.yaml"
    conf.write_text("cleanbuild: [1, 2\n")
    code, lines = fails(capsys, "-f", str(conf), "plan", "--arch", "gfx942")
    assert (code, len(lines)) == (2, 1) and lines[0].startswith(f"error: {conf} is not a valid site config")


# ---- what only a process shows --------------------------------------------------------------------------------

ATOM_BUILD = ("-c", "from cleanbuild.cli.main import main; main()")


def invoke(*args: str, env: dict | None = None, entry: tuple[str, ...] = ATOM_BUILD) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *entry, *args], cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, check=False)


@pytest.mark.parametrize("entry", [ATOM_BUILD, ("-m", "invoke")], ids=["atom-build", "invoke"])
def test_the_real_entry_point_exits_2_without_a_traceback(entry):
    result = invoke("plan", "--arch", "gfx942", "--profile", "nope", entry=entry)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith("error: profile 'nope' not found") and "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("content,needle", [
    (b"cleanbuild: [1, 2\n", "while parsing a flow sequence"),
    (b"\xff\xfe\x00binary\x81\n", "codec can't decode"),
    (b"cleanbuild: [1, 2]\n", "`cleanbuild:` must be a mapping, not list"),
    (b"cleanbuild:\n  profil: offline\n", "unknown key cleanbuild.profil"),
], ids=["syntax", "binary", "structure", "unknown-key"])
def test_a_broken_site_config_is_one_line_and_exit_2(tmp_path, content, needle):
    conf = tmp_path / "invoke.yaml"
    conf.write_bytes(content)
    result = invoke("arch", "--arch", "gfx942", env={"INVOKE_RUNTIME_CONFIG": str(conf)})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith(f"error: {conf} is not a valid site config (") and needle in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


# ---- the arch is parsed once, at the edge -------------------------------------------------------------------

def arch_parse_calls(tree: ast.AST) -> list[int]:
    """Lines calling Arch.parse or Arch.parse_list."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr in ("parse", "parse_list")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "Arch"]


def test_an_arch_name_becomes_an_arch_in_one_place():
    """Outside arch.py itself (the parser, and host detection's own probe output), only request.load.parse_arch turns
    a name into an Arch: --arch of every task, nox -s validate --arch and an image's arch label."""
    found = {}
    for path in [*sorted((ROOT / "cleanbuild").rglob("*.py")), ROOT / "tasks.py"]:
        if path.name == "arch.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            calls = arch_parse_calls(fn)
            if calls:
                found[f"{path.relative_to(ROOT)}:{fn.name}"] = len(calls)
    assert list(found) == ["cleanbuild/request/load.py:parse_arch"]


def test_one_plan_command_parses_each_arch_name_once(capsys, monkeypatch):
    from cleanbuild.gpuhost.arch import Arch

    seen: list[str] = []
    parse = Arch.parse.__func__

    def counting(cls, name):
        seen.append(name)
        return parse(cls, name)

    monkeypatch.setattr(Arch, "parse", classmethod(counting))
    program().run(["invoke", "plan", "--arch", "gfx942,gfx950", "--json"])
    assert len(plans_printed(capsys.readouterr().out)) == 2
    assert seen == ["gfx942", "gfx950"]
