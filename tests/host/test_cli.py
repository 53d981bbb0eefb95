"""The invoke tasks as a user runs them: one-line errors, fixed exit codes, no traceback unless --debug."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args, env=None):
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


def test_list_shows_every_step_task():
    out = invoke("--list").stdout
    for name in ("wheels", "clean", "patch", "smoke", "tag", "build-clean", "plan", "arch", "report"):
        assert f"  {name} " in out or f"  {name}\n" in out, name


@pytest.mark.parametrize("args,code,needle", [
    (("arch", "--arch", "gfx1100"), 2, "not supported. To fix, pass --arch gfx942|gfx950"),
    (("arch", "--arch", "gfx941"), 2, "pre-release"),
    (("plan", "--arch", "gfx942", "--profile", "nope"), 2, "profile 'nope' not found"),
    (("plan", "--arch", "gfx942", "--set", "oops"), 2, "KEY=VALUE"),
    (("plan", "--arch", "gfx942", "--ca-bundle", "/no/such.pem"), 2, "is not a file"),
    (("plan", "--arch", "gfx942", "--model", "/no/such/model"), 2, "is not a folder"),
    (("patch",), 2, "exactly one of --src DIR or --image TAG"),
])
def test_bad_input_is_one_line_and_a_fixed_code(args, code, needle):
    result = invoke(*args)
    assert result.returncode == code, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_debug_shows_the_traceback():
    result = invoke("arch", "--arch", "gfx1100", "--debug")
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_arch_prints_facts_as_json():
    data = json.loads(invoke("arch", "--arch", "gfx942", "--json").stdout)
    assert data["fp8_dtype"] == "float8_e4m3fnuz" and data["fp8_max"] == 240 and data["lds_per_cu_kib"] == 64


def test_plan_prints_the_commands_build_clean_runs():
    result = invoke("plan", "--arch", "gfx950", "--ck-free", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["build_args"]["clean"]["GPU_ARCH"] == "gfx950" and data["build_args"]["wheels"]["ENABLE_CK"] == "0"
    assert data["commands"][0].startswith("docker buildx build ")
    assert data["steps"] == ["preflight", "wheels", "clean", "patch", "validate", "smoke", "tag", "report"]


def test_plan_matrix_gives_one_plan_per_arch():
    result = invoke("plan", "--arch", "gfx942,gfx950")
    assert result.returncode == 0
    shown = result.stderr + result.stdout
    assert "plan: gfx942 ck" in shown and "plan: gfx950 ck" in shown
    assert result.stdout.count("docker buildx build") == 6  # wheels, clean, patch for each arch


def test_config_file_beats_default_and_flag_beats_config(tmp_path):
    (tmp_path / "invoke.yaml").write_text("cleanbuild:\n  overrides:\n    components.aiter.ref: " + "a" * 40 + "\n")
    env = {**__import__("os").environ, "INVOKE_RUNTIME_CONFIG": str(tmp_path / "invoke.yaml")}
    via_config = json.loads(invoke("plan", "--arch", "gfx942", "--json", env=env).stdout)
    assert via_config["build_args"]["wheels"]["AITER_REF"] == "a" * 40
    via_flag = json.loads(invoke("plan", "--arch", "gfx942", "--json", "--set", "components.aiter.ref=" + "b" * 40, env=env).stdout)
    assert via_flag["build_args"]["wheels"]["AITER_REF"] == "b" * 40
