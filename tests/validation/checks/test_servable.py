"""validation's route check over the real ATOM and aiter at the pins (found on sys.path as the image's Python finds
them): a CK-free image's route that needs a module its build left out fails the check, naming it; the build's
--allow-unservable (ATOM_BUILD_ALLOW_UNSERVABLE=1) makes it a warning; with CK every aiter module is there."""

from __future__ import annotations

import pytest

from validation.checks import servable


@pytest.fixture
def route_check(site, cpu_ctx, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(servable.ALLOW_ENV, raising=False)

    def run(ck_mode: str) -> dict:
        result = servable.run(cpu_ctx("gfx950", ck_mode=ck_mode, model="qwen3-30b-a3b"))
        return {"status": result.status, "note": result.cases[0].note, "metrics": result.metrics}

    return run


@pytest.mark.parametrize(("allow", "status"), [(False, "failed"), (True, "warning")])
def test_a_ck_free_route_needing_a_missing_module_fails_unless_allowed(route_check, monkeypatch, allow, status):
    if allow:
        monkeypatch.setenv(servable.ALLOW_ENV, "1")
    check = route_check("ckfree")
    assert check["status"] == status
    assert "cannot serve qwen3-30b-a3b" in check["note"] and "module_" in check["note"]
    route = check["metrics"]["route"][0]
    assert route["model"] == "qwen3-30b-a3b" and not route["servable"] and route["missing"]
    assert check["metrics"]["allowed_unservable"] is allow


def test_with_ck_the_route_has_every_aiter_module(route_check):
    route = route_check("ck")["metrics"]["route"][0]
    assert not [m for m in route["missing"] if m["module"] != "flydsl"]  # only FlyDSL, where this Python lacks it


def test_a_model_atom_has_no_class_for_fails_the_check(site, cpu_ctx, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "config.json").write_text('{"architectures": ["NoSuchForCausalLM"]}')
    result = servable.run(cpu_ctx("gfx950", ck_mode="ck", model=str(tmp_path)))
    assert result.status == "failed" and "NoSuchForCausalLM" in result.cases[0].note
