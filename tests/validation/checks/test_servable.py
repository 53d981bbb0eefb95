"""validation's route check, in a fresh `python -m validation` over the real ATOM and aiter at the pins: a CK-free
image's route that needs a module its build left out fails the check, naming it; the build's --allow-unservable
(ATOM_BUILD_ALLOW_UNSERVABLE=1) makes it a warning; with CK every module is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.validation.conftest import REPO


def route_check(site, tmp_path, ck_mode: str, **env: str) -> tuple[int, dict]:
    out = tmp_path / f"{ck_mode}-{len(env)}.json"
    argv = [sys.executable, "-m", "validation", "--arch", "gfx950", "--device", "cpu", "--only", "route", "--ck-mode",
            ck_mode, "--model", "qwen3-30b-a3b", "--json-file", str(out)]
    environ = {k: v for k, v in os.environ.items() if k != "ATOM_BUILD_ALLOW_UNSERVABLE"}
    environ |= {"PYTHONPATH": f"{site}{os.pathsep}{REPO}", **env}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=environ, timeout=300, check=False)  # noqa: S603
    assert out.is_file(), proc.stderr[-2000:]
    return proc.returncode, next(c for c in json.loads(out.read_text())["checks"] if c["name"] == "route")


@pytest.mark.parametrize(("allow", "code", "status"), [({}, 1, "failed"),
                                                       ({"ATOM_BUILD_ALLOW_UNSERVABLE": "1"}, 0, "warning")])
def test_a_ck_free_route_needing_a_missing_module_fails_unless_allowed(site, tmp_path, allow, code, status):
    exit_code, check = route_check(site, tmp_path, "ckfree", **allow)
    assert (exit_code, check["status"]) == (code, status)
    note = check["cases"][0]["note"]
    assert "cannot serve qwen3-30b-a3b" in note and "module_" in note
    route = check["metrics"]["route"][0]
    assert route["model"] == "qwen3-30b-a3b" and not route["servable"] and route["missing"]
    assert check["metrics"]["allowed_unservable"] is bool(allow)


def test_with_ck_the_route_has_every_aiter_module(site, tmp_path):
    _, check = route_check(site, tmp_path, "ck")
    route = check["metrics"]["route"][0]
    assert not [m for m in route["missing"] if m["module"] != "flydsl"]  # only FlyDSL, where this Python lacks it
