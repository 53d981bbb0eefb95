"""The command line: usage errors and exit codes in-process (validation.cli.main); the real entry point
`python -m validation` in a subprocess only where a process proves something (its exit code, import order)."""

import json
import sys

import pytest

from validation.checks.report import STATUSES, Report, render
from validation.cli import main

TOP_KEYS = {"arch", "device", "device_name", "torch", "triton", "aiter", "aiter_commit", "aiter_source", "wall_s",
            "exit_code", "checks"}
CHECK_KEYS = {"name", "status", "reason", "wall_s", "metrics", "cases"}
CASE_KEYS = {"name", "status", "cosine", "max_abs_err", "frac_out_of_tol", "nan_inf", "backend", "note"}
NAMES = ["arch-consistency", "gemm-hipblaslt", "gemm-triton", "moe-triton", "atom-reroutes", "gemm-ck", "gemm-asm",
         "lds-budget", "tuned-csv-coverage", "payload", "first-use-compile", "route"]
CPU = ["--arch", "gfx942", "--device", "cpu"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("GPU_ARCHS", "AITER_CONFIG_GEMM_BF16", "ATOM_BUILD_CK_MODE", "ATOM_CK_FREE"):
        monkeypatch.delenv(var, raising=False)


def _check_schema(data):
    assert set(data) == TOP_KEYS
    assert isinstance(data["wall_s"], float) and isinstance(data["exit_code"], int)
    for chk in data["checks"]:
        assert set(chk) == CHECK_KEYS
        assert chk["status"] in STATUSES
        assert isinstance(chk["wall_s"], float) and isinstance(chk["metrics"], dict)
        for case in chk["cases"]:
            assert set(case) == CASE_KEYS
            assert case["status"] in STATUSES
            assert all(isinstance(case[k], float) for k in ("cosine", "max_abs_err", "frac_out_of_tol"))
            assert isinstance(case["nan_inf"], bool)


def test_full_cpu_run_of_the_entry_point_on_aiters_source_exits_0_and_writes_the_schema(tmp_path, run_cli, pin_patched,
                                                                                      interpreter_runs_aiter):
    """Every check, in a fresh process (the interpreter must be set before any Triton module loads, aiter's
    included), on the patched pin's source: aiter's own kernels run through the adapter, and the run exits 0."""
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx950", "--device", "cpu", "--aiter-src", str(pin_patched), "--json-file", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    _check_schema(data)
    assert [c["name"] for c in data["checks"]] == NAMES
    cases = [c for chk in data["checks"] for c in chk["cases"]]
    assert sum(c["backend"].startswith("aiter-triton (adapter") and c["status"] == "passed" for c in cases) >= 9
    assert {c["name"]: c["status"] for c in data["checks"]}["gemm-hipblaslt"] == "passed"


def _json(tmp_path, *args) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    code = main([*args, "--json-file", str(out)])
    return code, json.loads(out.read_text())


def test_the_report_names_the_aiter_commit_of_the_checkout(tmp_path, aiter_checkout, aiter_pin):
    _, data = _json(tmp_path, *CPU, "--aiter-src", str(aiter_checkout), "--only", "gemm-ck")
    assert data["aiter_commit"] == aiter_pin


def test_aiter_root_is_kept_as_an_alias(tmp_path, aiter_checkout, aiter_pkg):
    _, data = _json(tmp_path, *CPU, "--aiter-root", str(aiter_checkout), "--only", "gemm-ck")
    assert data["aiter_source"] == str(aiter_pkg.resolve())


def test_two_arch_gpu_archs_exits_1(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_ARCHS", "gfx942;gfx950")
    code, data = _json(tmp_path, *CPU, "--only", "arch-consistency")
    assert (code, data["exit_code"], data["checks"][0]["status"]) == (1, 1, "failed")


def test_only_runs_just_those(tmp_path):
    _, data = _json(tmp_path, "--arch", "gfx950", "--device", "cpu", "--only", "lds-budget", "gemm-ck")
    assert [c["name"] for c in data["checks"]] == ["lds-budget", "gemm-ck"]


def test_malformed_csv_fails_the_check_not_the_run(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("M,N\n1,2\n")
    code, data = _json(tmp_path, *CPU, "--only", "tuned-csv-coverage", "--tuned-csv", str(bad))
    assert (code, data["checks"][0]["reason"]) == (1, f"{bad}: missing columns cu_num, K, libtype (has: M, N)")


def test_ck_mode_flag_decides_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOM_BUILD_CK_MODE", "ck")
    _, data = _json(tmp_path, *CPU, "--only", "gemm-ck", "--ck-mode", "ckfree")
    assert data["checks"][0]["reason"] == "aiter not installed (--ck-mode: CK mode ckfree)"


def test_ck_mode_from_the_image_environment_says_which_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOM_CK_FREE", "1")
    _, data = _json(tmp_path, *CPU, "--only", "gemm-ck")
    assert data["checks"][0]["reason"] == "aiter not installed (ATOM_CK_FREE=1: CK mode ckfree)"


def test_a_contradictory_ck_environment_fails_gemm_ck(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOM_BUILD_CK_MODE", "ck")
    monkeypatch.setenv("ATOM_CK_FREE", "1")
    code, data = _json(tmp_path, *CPU, "--only", "gemm-ck")
    assert (code, data["checks"][0]["status"]) == (1, "failed")


def _array_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2, 3]")
    return str(path)


def _file_as_parent(tmp_path):
    (tmp_path / "afile").write_text("x")
    return str(tmp_path / "afile" / "r.json")


USAGE = {
    "unknown arch": lambda t: ["--arch", "gfx90a"],
    "auto without AMD": lambda t: ["--arch", "auto", "--device", "cpu"],
    "unknown check": lambda t: [*CPU, "--only", "gemm-magic"],
    "missing model": lambda t: [*CPU, "--model", "/nonexistent/config.json"],
    "model is a JSON array": lambda t: [*CPU, "--model", _array_config(t)],
    "tp 0": lambda t: [*CPU, "--tp", "0"],
    "tp not a number": lambda t: [*CPU, "--tp", "eight"],
    "cu-num -1": lambda t: [*CPU, "--cu-num", "-1"],
    "cu-num 0": lambda t: [*CPU, "--cu-num", "0"],
    "min-coverage above 1": lambda t: [*CPU, "--min-coverage", "1.5"],
    "min-coverage negative": lambda t: [*CPU, "--min-coverage", "-0.1"],
    "no arch": lambda t: ["--device", "cpu"],
    "bad ck mode": lambda t: [*CPU, "--ck-mode", "full"],
    "json under a file": lambda t: [*CPU, "--json-file", _file_as_parent(t)],
    "json is a folder": lambda t: [*CPU, "--json-file", str(t)],
    "json where no file can be made": lambda t: [*CPU, "--json-file", "/proc/nope/r.json"],
    "write-untuned is a folder": lambda t: [*CPU, "--write-untuned", str(t)],
    "aiter-src without aiter": lambda t: [*CPU, "--aiter-src", str(t)],
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_usage_errors_exit_2_with_one_line_before_any_check(case, tmp_path, capsys):
    code = main(USAGE[case](tmp_path))
    out, err = capsys.readouterr()
    # One stderr line and no stdout: no check ran (each prints a progress line, the run prints a table).
    assert (code, out, len(err.strip().splitlines()), err.startswith("python -m validation: error:")) == \
        (2, "", 1, True), err


def test_a_json_array_config_is_named_as_such(tmp_path, capsys):
    main([*CPU, "--model", _array_config(tmp_path)])
    assert "is a JSON array" in capsys.readouterr().err


def test_an_unwritable_json_path_is_named(tmp_path, capsys):
    main([*CPU, "--json-file", _file_as_parent(tmp_path)])
    assert "cannot write there" in capsys.readouterr().err


def test_a_json_target_that_fails_the_write_is_one_line_exit_3(capsys):
    assert main([*CPU, "--only", "lds-budget", "--json-file", "/dev/full"]) == 3
    assert capsys.readouterr().err.splitlines()[-1] == ("python -m validation: error: --json-file /dev/full: writing "
                                                        "failed (No space left on device); free space there or name "
                                                        "another path")


def test_the_writability_probe_leaves_no_file(tmp_path):
    out = tmp_path / "new" / "r.json"
    main([*CPU, "--json-file", str(out), "--tp", "0"])  # a usage error after the probe: nothing is written
    assert not out.exists()


def test_plain_table_without_rich(monkeypatch):
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")] + ["rich"]:
        monkeypatch.setitem(sys.modules, name, None)  # as in an image without rich
    text = render(Report("gfx942", "cpu", "cpu", "t", None, None))
    assert ("┃" in text, text.splitlines()[1].split()[:2]) == (False, ["check", "/"])


# --- parse first: no torch needed, nothing written before every argument is valid --------------------


@pytest.fixture
def no_torch(monkeypatch):
    """This process as a host without torch: `import torch` fails, and every validation module but the CLI
    (and the torch-free archs it imports at the top) is unloaded, so what the CLI imports is imported afresh."""
    import validation

    monkeypatch.setitem(sys.modules, "torch", None)
    for name in [m for m in sys.modules if m.startswith("validation.")]:
        if name not in ("validation.cli", "validation.core.archs"):
            monkeypatch.delitem(sys.modules, name)
            if name.count(".") == 1 and hasattr(validation, name.split(".")[1]):
                attr = name.split(".")[1]
                monkeypatch.setattr(validation, attr, getattr(validation, attr))


def test_help_needs_no_torch(no_torch, capsys):
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m validation")


@pytest.mark.parametrize("args", [["--arch", "gfx942", "--tp", "0"], ["--arch", "gfx942", "--cu-num", "-1"]],
                         ids=["tp 0", "cu-num -1"])
def test_usage_errors_need_no_torch(no_torch, capsys, args):
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("python -m validation: error: argument")


def test_the_no_torch_fixture_really_hides_torch(no_torch):
    with pytest.raises(ImportError):
        import torch  # noqa: F401


def test_check_names_are_the_checks_in_run_order():
    from validation.checks import CHECKS
    from validation.cli import CHECK_NAMES

    assert list(CHECK_NAMES) == list(CHECKS)


@pytest.mark.parametrize("bad", [["--cu-num", "-1"], ["--tp", "0"], ["--aiter-src", "/nonexistent-aiter"]],
                         ids=["cu-num -1", "tp 0", "missing aiter-src"])
def test_a_usage_error_creates_no_json_folder(tmp_path, bad):
    out = tmp_path / "new" / "deeper" / "r.json"
    assert main([*CPU, "--json-file", str(out), *bad]) == 2
    assert not (tmp_path / "new").exists()


def test_the_json_folder_is_made_when_the_report_is_written(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "r.json"
    assert main([*CPU, "--json-file", str(out), "--only", "gemm-ck"]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text())["checks"][0]["name"] == "gemm-ck"


# --- coverage: a warning, exit 0, unless --min-coverage asks for more ------------------------------------


def _empty_csv(tmp_path):
    path = tmp_path / "tuned.csv"
    path.write_text("gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,bpreshuffle,libtype,solidx,splitK,us,kernelName\n")
    return str(path)


def test_poor_coverage_is_a_warning_that_exits_0(tmp_path, capsys):
    code, data = _json(tmp_path, *CPU, "--only", "tuned-csv-coverage", "--tuned-csv", _empty_csv(tmp_path))
    assert (code, data["checks"][0]["status"]) == (0, "warning")


def test_poor_coverage_warning_is_in_the_table(tmp_path, capsys):
    main([*CPU, "--only", "tuned-csv-coverage", "--tuned-csv", _empty_csv(tmp_path)])
    assert "WARNING" in capsys.readouterr().out


def test_poor_coverage_names_count_missing_shapes_and_untuned_csv(tmp_path, capsys):
    untuned = tmp_path / "untuned.csv"
    _, data = _json(tmp_path, *CPU, "--only", "tuned-csv-coverage", "--tuned-csv", _empty_csv(tmp_path), "--tp", "8",
                    "--write-untuned", str(untuned))
    assert data["checks"][0]["reason"].startswith("warning: tp8: 0/70 shapes covered (0.0%) for gfx942 cu_num 304")
    assert "missing qkv_proj M=1 N=768 K=4096" in data["checks"][0]["cases"][0]["note"]
    assert f"untuned CSV of the 70 missing shapes: {untuned}" in data["checks"][0]["cases"][0]["note"]


def test_min_coverage_turns_poor_coverage_into_exit_1(tmp_path, capsys):
    code, data = _json(tmp_path, *CPU, "--only", "tuned-csv-coverage", "--tuned-csv", _empty_csv(tmp_path),
                       "--min-coverage", "0.5")
    assert (code, data["checks"][0]["status"]) == (1, "failed")
