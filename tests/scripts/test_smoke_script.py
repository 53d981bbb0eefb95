"""docker/scripts/smoke.py as a library: the argument split, the result line, and the CPU mode's ATOM entry-point
check, without torch, transformers or ATOM (the generation itself runs in the image: tests/docker)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cleanbuild.images.steps import smoke_result
from tests.support.scripts import load_script

smoke = load_script("smoke")


def result_line(out: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("SMOKE_RESULT ")]
    assert len(lines) == 1, out
    return json.loads(lines[0].removeprefix("SMOKE_RESULT "))


def fake_atom(result: dict, seen: list):
    def run_atom(command):
        seen.append(command)
        return dict(result)

    return run_atom


GOOD = {"mode": "atom", "new_tokens": 10, "all_prompts_generated": True, "counted_by": "token_ids"}


def test_arguments_after_the_separator_are_the_generation_command(monkeypatch, capsys):
    seen: list = []
    monkeypatch.setattr(smoke, "run_atom", fake_atom(GOOD, seen))
    argv = ["atom", "--model", "/model", "--min-tokens", "3", "--", "python", "-m", "atom.examples.simple_inference",
            "--model", "/model", "--min-tokens", "99"]
    assert smoke.main(argv) == 0
    assert seen == [["python", "-m", "atom.examples.simple_inference", "--model", "/model", "--min-tokens", "99"]]
    assert (result_line(capsys.readouterr().out)["min_tokens"]) == 3


def test_enough_tokens_pass(monkeypatch, capsys):
    monkeypatch.setattr(smoke, "run_atom", fake_atom(GOOD, []))
    assert smoke.main(["atom", "--model", "/m", "--min-tokens", "10", "--", "python", "-m", "x"]) == 0
    assert result_line(capsys.readouterr().out)["passed"] is True


def test_too_few_tokens_fail(monkeypatch, capsys):
    monkeypatch.setattr(smoke, "run_atom", fake_atom({**GOOD, "new_tokens": 9}, []))
    assert smoke.main(["atom", "--model", "/m", "--min-tokens", "10", "--", "python", "-m", "x"]) == 1
    out = capsys.readouterr()
    assert result_line(out.out)["passed"] is False and "smoke: failed: 9 new tokens" in out.err


def test_a_prompt_without_tokens_fails(monkeypatch, capsys):
    monkeypatch.setattr(smoke, "run_atom", fake_atom({**GOOD, "all_prompts_generated": False}, []))
    assert smoke.main(["atom", "--model", "/m", "--", "python", "-m", "x"]) == 1
    assert result_line(capsys.readouterr().out)["passed"] is False


def test_a_failing_mode_reports_passed_false_and_exits_1(capsys):
    """atom mode without a `python -m MODULE` command fails inside the mode: the result still comes out."""
    assert smoke.main(["atom", "--model", "/m"]) == 1
    out = capsys.readouterr()
    result = result_line(out.out)
    assert (result["passed"], result["new_tokens"]) == (False, 0)
    assert "the atom mode runs `python -m MODULE ...`" in result["error"] and out.err.startswith("smoke: failed: ")


def test_an_exception_in_the_mode_is_the_result(monkeypatch, capsys):
    def broken(command):
        raise RuntimeError("HIP error: no device")

    monkeypatch.setattr(smoke, "run_atom", broken)
    assert smoke.main(["atom", "--model", "/m", "--", "python", "-m", "x"]) == 1
    assert result_line(capsys.readouterr().out)["error"] == "RuntimeError: HIP error: no device"


def test_the_host_reads_the_result_line_smoke_prints(monkeypatch, capsys):
    monkeypatch.setattr(smoke, "run_atom", fake_atom(GOOD, []))
    smoke.main(["atom", "--model", "/m", "--", "python", "-m", "x"])
    logs = "loading model\n" + capsys.readouterr().out + "exiting\n"
    assert smoke_result(logs) == {**GOOD, "min_tokens": 10, "passed": True}


# ---- the CPU mode's check of ATOM's entry point ---------------------------------------------------------------

def fake_atom_package(root: Path, example: str | None) -> Path:
    package = root / "atom"
    (package / "examples").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if example is not None:
        (package / "examples" / "simple_inference.py").write_text(example)
    return package


@pytest.fixture
def find_atom(monkeypatch):
    """Point importlib.util.find_spec("atom") at a folder (or at nothing); other names are looked up as usual."""
    real = importlib.util.find_spec

    def install(package: Path | None):
        def find_spec(name, *args, **kwargs):
            if name != "atom":
                return real(name, *args, **kwargs)
            if package is None:
                return None
            return importlib.util.spec_from_file_location("atom", package / "__init__.py",
                                                          submodule_search_locations=[str(package)])

        monkeypatch.setattr(smoke.importlib.util, "find_spec", find_spec)

    return install


EXAMPLE = """import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--max-tokens", type=int, default=16)
"""


def test_entry_point_that_declares_max_tokens(tmp_path, find_atom):
    package = fake_atom_package(tmp_path, EXAMPLE)
    find_atom(package)
    assert smoke.atom_entry_point() == (True, f"{package / 'examples' / 'simple_inference.py'} declares --max-tokens")


def test_entry_point_that_lacks_max_tokens(tmp_path, find_atom):
    find_atom(fake_atom_package(tmp_path, EXAMPLE.replace('"--max-tokens"', '"--max-new-tokens"')))
    ok, note = smoke.atom_entry_point()
    assert (ok, note.endswith("lacks --max-tokens")) == (False, True)


def test_entry_point_file_missing(tmp_path, find_atom):
    find_atom(fake_atom_package(tmp_path, None))
    ok, note = smoke.atom_entry_point()
    assert (ok, note.endswith("simple_inference.py is missing")) == (False, True)


def test_atom_not_installed(find_atom):
    find_atom(None)
    assert smoke.atom_entry_point() == (False, "atom is not installed")
