"""The command line: exit codes, one-line usage errors, and the JSON schema the host pipeline reads."""

import json

import pytest

TOP_KEYS = {"arch", "device", "device_name", "torch", "triton", "aiter", "wall_s", "exit_code", "checks"}
CHECK_KEYS = {"name", "status", "reason", "wall_s", "metrics", "cases"}
CASE_KEYS = {"name", "status", "cosine", "max_abs_err", "frac_out_of_tol", "nan_inf", "backend", "note"}
NAMES = ["arch-consistency", "gemm-hipblaslt", "gemm-triton", "moe-triton", "gemm-ck", "gemm-asm", "lds-budget",
         "tuned-csv-coverage"]


def _check_schema(data):
    assert set(data) == TOP_KEYS
    assert isinstance(data["wall_s"], float) and isinstance(data["exit_code"], int)
    for chk in data["checks"]:
        assert set(chk) == CHECK_KEYS
        assert chk["status"] in ("passed", "failed", "skipped")
        assert isinstance(chk["wall_s"], float) and isinstance(chk["metrics"], dict)
        for case in chk["cases"]:
            assert set(case) == CASE_KEYS
            assert case["status"] in ("passed", "failed", "skipped")
            assert all(isinstance(case[k], float) for k in ("cosine", "max_abs_err", "frac_out_of_tol"))
            assert isinstance(case["nan_inf"], bool)


def test_full_cpu_run_passes_and_writes_the_schema(tmp_path, run_cli):
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx942", "--device", "cpu", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    _check_schema(data)
    assert [c["name"] for c in data["checks"]] == NAMES
    assert data["arch"] == "gfx942" and data["device"] == "cpu" and data["exit_code"] == 0
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["gemm-triton"]["status"] == "passed"
    assert by_name["moe-triton"]["status"] == "passed"
    assert by_name["gemm-ck"]["status"] == "skipped"
    assert "SKIPPED" in proc.stdout and "PASSED" in proc.stdout  # the table for people


def test_two_arch_gpu_archs_exits_1(tmp_path, run_cli):
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx942", "--device", "cpu", "--only", "arch-consistency", "--json", str(out),
                   env={"GPU_ARCHS": "gfx942;gfx950"})
    assert proc.returncode == 1
    data = json.loads(out.read_text())
    assert data["exit_code"] == 1
    assert data["checks"][0]["status"] == "failed"
    assert "LAST (gfx950)" in json.dumps(data)


def test_only_runs_just_those(tmp_path, run_cli):
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx950", "--device", "cpu", "--only", "lds-budget", "gemm-ck", "--json", str(out))
    assert proc.returncode == 0
    assert [c["name"] for c in json.loads(out.read_text())["checks"]] == ["lds-budget", "gemm-ck"]


def test_malformed_csv_fails_without_a_traceback(tmp_path, run_cli):
    bad = tmp_path / "bad.csv"
    bad.write_text("M,N\n1,2\n")
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx942", "--device", "cpu", "--only", "tuned-csv-coverage", "--tuned-csv", str(bad),
                   "--json", str(out))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "missing columns cu_num, K, libtype" in json.loads(out.read_text())["checks"][0]["reason"]


@pytest.mark.parametrize("args", [
    ["--arch", "gfx90a"],
    ["--arch", "auto", "--device", "cpu"],
    ["--arch", "gfx942", "--device", "cpu", "--only", "gemm-magic"],
    ["--arch", "gfx942", "--device", "cpu", "--model", "/nonexistent/config.json"],
    ["--arch", "gfx942", "--device", "cpu", "--tp", "0"],
    ["--device", "cpu"],
])
def test_usage_errors_exit_2_with_one_line(run_cli, args):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("python -m validation: error:")


def test_plain_table_without_rich(tmp_path, run_cli):
    # A sitecustomize that hides rich, as in an image without it.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['rich'] = None\n")
    proc = run_cli("--arch", "gfx942", "--device", "cpu", "--only", "gemm-ck", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0
    assert "┃" not in proc.stdout
    assert "gemm-ck" in proc.stdout and "SKIPPED" in proc.stdout
