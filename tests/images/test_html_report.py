"""report.html (cleanbuild.images.htmlpage) without an engine: written beside report.json from the same dict, every string
escaped, and the page holds the run's steps, units, layers and validation rows.

The record is made the way production makes it: the wheels manifest by collect_wheels (the producer's fixture),
validation's JSON by validation.checks.report, the patch report by patches.engine, and report.write in front.
"""

from __future__ import annotations

import json
import webbrowser
from pathlib import Path

import pytest

from cleanbuild.commands import audit_report, existing
from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.images import htmlpage, report
from cleanbuild.images.record import (
    BuildRecord,
    ImageSummary,
    StepRecord,
    StepStatus,
    UnitRecord,
    Wheels,
    digest,
)
from patches.engine import Report as PatchReport
from patches.engine import Result
from tests.support.collect_stage import collect
from tests.support.htmlpage import Page
from tests.support.requests import offline_plan
from validation.checks.report import Case, CheckResult
from validation.checks.report import Report as ValidationReport

EVIL = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
MIB = 2**20


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REPORTS", tmp_path / "reports")
    return tmp_path / "reports"


def _on_route(kind: str, name: str, module: str, present: bool) -> dict:
    return {"kind": kind, "name": name, "module": module, "entry": "aiter.fused_moe.fused_moe",
            "site": "atom.model_ops.moe.UnquantizedFusedMoEMethod.apply", "present": present}


# validation's route check as validation.checks.servable writes it (a model's route: validation.routing.layers).
ROUTE = CheckResult.from_cases("route", [Case.warning("qwen3-30b-a3b", "atom", "route: cannot serve (allowed)")], {
    "allowed_unservable": True, "route": [{
        "model": "qwen3-30b-a3b", "arch_class": "atom.models.qwen3_moe.Qwen3MoeForCausalLM", "ck_mode": "ckfree",
        "switches": {}, "unresolved": 3, "servable": False, "missing": [], "layers": [
            {"layer": "model.layers.mlp.experts", "op": "FusedMoE", "kernels": [
                _on_route("jit", "aiter.ops.moe_op.ck_moe_stage1_fwd", "module_moe_ck2stages", False),
                _on_route("triton", "aiter.ops.triton.x._topk", "", True)]}]}]})


def validation(label: str = "gemm") -> dict:
    cases = [Case("qkv_proj M=1", "passed", 0.999998, 0.0039, 0.0, False, "aiter-dispatch:triton"),
             Case("o_proj M=33", "passed", 0.999991, 0.0078, 0.0, False, "aiter-dispatch:hipblaslt")]
    coverage = CheckResult.from_cases("tuned-csv-coverage", [Case.warning("tp8", "tuned-csv", "0/70 shapes covered")],
                                      {"model": "llama3-8b", "warn_below": 0.5,
                                       "tp1": {"shapes": 70, "covered": 23, "coverage": 0.3286, "status": "warning"},
                                       "tp8": {"shapes": 70, "covered": 0, "coverage": 0.0, "status": "warning"}})
    checks = [CheckResult.from_cases(label, cases), coverage, ROUTE]
    out = ValidationReport("gfx950", "cpu", "cpu (TRITON_INTERPRET=1)", "2.13.0", "3.6.0", "0.1.20", "79366eb8",
                           "/opt/venv/aiter", 12.5, 0, checks)
    return json.loads(out.to_json())


def record(manifest: dict, plan, *, label: str = "io.atom-build.profile", step_detail: str = "engine 26.1") -> BuildRecord:
    units = (UnitRecord("torch", "a" * 64, "atom-build/wheel-torch:aaaa", "sha256:t", "reused", "found here by key",
                        seconds=0.4),
             UnitRecord("aiter", "b" * 64, "atom-build/wheel-aiter:bbbb", "sha256:a", "built", "built",
                        ("AITER_REF",), 312.5),
             UnitRecord("venv", "c" * 64, "atom-build/venv:cccc", "sha256:v", "reused",
                        "pulled from the registry by key", seconds=8.0),
             UnitRecord("candidate", "d" * 64, plan.patch.image, "sha256:c", "built", "built", (), 9.5))
    steps = (StepRecord("preflight", StepStatus.PASSED, 0.3, step_detail),
             StepRecord("wheels", StepStatus.PASSED, 320.0, "aiter built"),
             StepRecord("clean", StepStatus.REUSED, 8.2, "found"),
             StepRecord("patch", StepStatus.PASSED, 10.0, "tuned_gemm=applied"),
             StepRecord("validate", StepStatus.PASSED, 40.0, "3 passed"))
    sizes = ({"digest": "sha256:l0", "size": 80 * MIB, "created_by": "import", "unit": "base"},
             {"digest": "sha256:l1", "size": 1500 * MIB, "created_by": "RUN pip install torch", "unit": "venv"},
             {"digest": "sha256:l2", "size": 37 * MIB, "created_by": "RUN pip install atom", "unit": "atom-layer"},
             {"digest": "sha256:l3", "size": 211 * MIB, "created_by": "RUN pip install amd-aiter", "unit": "clean"},
             {"digest": "sha256:l4", "size": 3 * MIB, "created_by": "RUN python -m patches", "unit": "candidate"})
    image = ImageSummary(1831 * MIB, tuple(s["digest"] for s in sizes), {label: EVIL},
                         tuple(sorted(sizes, key=lambda s: -s["size"])), sizes)
    patches = PatchReport("/opt/venv", "apply", [Result("tuned_gemm", "aiter/tuned_gemm.py", "applied", "ok", "+x")])
    raw = json.dumps(manifest).encode()
    return BuildRecord(run_id="r1", started=0.0, started_at="2026-12-01T10:00:00+00:00", units=units, steps=steps,
                       wheels=Wheels(plan.wheels.image, "sha256:w", False, manifest, digest(raw)), image=image,
                       candidate_id="sha256:c", candidate_ref=plan.patch.image, patches=patches.to_json(),
                       validation=validation(), finished=400.0)


def manifest_of(stage) -> dict:  # noqa: F811
    errors, out = collect(stage)
    assert errors == []
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture
def page(reports, stage) -> tuple[Path, Page]:  # noqa: F811
    plan = offline_plan()
    folder = report.write(plan, record(manifest_of(stage), plan), failed=False)
    return folder, Page((folder / "report.html").read_text())


def test_report_html_is_written_beside_report_json(page):
    folder, _ = page
    assert sorted(p.name for p in folder.iterdir()) == ["provenance.json", "report.html", "report.json", "report.md",
                                                       "sbom.cdx.json"]


def test_the_page_holds_every_step_and_unit_bar_with_its_seconds(page):
    _, html = page
    bars = [a["class"] for tag, a in html.tags if tag == "g" and "bar" in a.get("class", "")]
    assert bars == ["bar step"] * 2 + ["bar unit"] * 2 + ["bar step", "bar unit", "bar step", "bar unit", "bar step"]
    titles = html.all_text()
    for text in ("preflight: passed, 0.3 s", "aiter: built, 312.5 s", "torch: local, 0.4 s", "venv: registry, 8.0 s",
                 "candidate: built, 9.5 s", "validate: passed, 40.0 s"):
        assert text in titles


def test_the_critical_path_is_the_chain_of_steps_and_its_longest_link_is_marked(page):
    _, html = page
    assert "(preflight → wheels → clean → patch → validate): 378.5 s of 400.0 s wall time" in html.all_text()
    longest = [a for tag, a in html.tags if tag == "rect" and "longest" in a.get("class", "").split()]
    assert len(longest) == 1 and "crit" in longest[0]["class"].split()


def test_the_layer_chart_names_each_layer_by_what_it_holds_with_its_size(page):
    _, html = page
    layers = [a for tag, a in html.tags if tag == "g" and a.get("class") == "layer"]
    text = html.all_text()
    assert len(layers) == 5
    for row in ("venv: Python, torch, deps 1.46 GiB", "aiter + runtime 211.0 MiB", "base image 80.0 MiB",
                "ATOM 37.0 MiB", "patches 3.0 MiB"):
        assert row in text


def test_the_validation_rows_show_status_cosine_error_and_the_kernel_that_ran(page):
    _, html = page
    text = html.all_text()
    assert "qkv_proj M=1 passed 0.999998 0.0039 aiter-dispatch:triton" in text
    assert "o_proj M=33 passed 0.999991 0.0078 aiter-dispatch:hipblaslt" in text
    assert "tp1 23/70 (32.9%)" in text and "tp8 0/70 (0.0%)" in text


def test_patches_pins_sbom_and_substitutes_are_on_the_page(page):
    _, html = page
    text = html.all_text()
    links = [a["href"] for tag, a in html.tags if tag == "a"]
    plan = offline_plan()
    aiter = next(c for c in plan.profile.components if c.name == "aiter").ref
    assert f"https://github.com/ROCm/aiter/commit/{aiter}" in links
    assert "tuned_gemm applied aiter/tuned_gemm.py" in text
    assert "amd-aiter 0.1.20.dev38+g79366eb81" in text  # the SBOM's component, from the manifest
    for sub in plan.profile.substitutes:
        assert sub in text


def test_a_new_release_shows_the_bytes_new_since_the_previous_one(reports, stage):  # noqa: F811
    plan = offline_plan()
    manifest = manifest_of(stage)
    first = report.write(plan, record(manifest, plan), failed=False)
    older = json.loads((first / "report.json").read_text())
    older.update(tag="atom-build/atom-gfx942:old", layers=older["layers"][:3])  # the release before it: 3 layers
    (first.parent / "old").mkdir()
    (first.parent / "old" / "report.json").write_text(json.dumps(older))
    data = json.loads((report.write(plan, record(manifest, plan), failed=False) / "report.json").read_text())
    assert data["since_previous"]["new_bytes"] == 214 * MIB and data["since_previous"]["tag"].endswith(":old")
    assert "214.0 MiB in 2 layers are new since the previous release" in Page(
        (first / "report.html").read_text()).all_text()


def test_layer_sizes_pair_the_history_with_the_layers_bottom_first():
    history = [{"Size": 3, "CreatedBy": "RUN patch"}, {"Size": 0, "CreatedBy": "ENV X=1"}, {"Size": 9, "CreatedBy": ""}]
    assert engine.layer_sizes(history, ["sha256:base", "sha256:top"]) == [
        {"digest": "sha256:base", "size": 9, "created_by": ""}, {"digest": "sha256:top", "size": 3, "created_by": "RUN patch"}]


def test_without_a_layer_for_each_sized_entry_no_digest_is_guessed():
    history = [{"Size": 3, "CreatedBy": "RUN a"}, {"Size": 9, "CreatedBy": "RUN b"}]
    assert [s["digest"] for s in engine.layer_sizes(history, ["sha256:only"])] == [None, None]


def no_active_content(html: Page) -> None:
    assert [t for t, _ in html.tags if t in ("script", "img", "iframe", "object")] == []
    assert [(t, k) for t, attrs in html.tags for k in attrs if k.startswith("on")] == []


def test_labels_logs_and_names_holding_markup_are_escaped(reports, stage):  # noqa: F811
    plan = offline_plan()
    rec = record(manifest_of(stage), plan, label=EVIL, step_detail=EVIL)
    rec = rec.__class__(**{**rec.__dict__, "validation": validation(EVIL)})
    folder = report.write(plan, rec, failed=True, error=EVIL)
    text = (folder / "report.html").read_text()
    html = Page(text)
    no_active_content(html)
    assert EVIL in html.all_text()  # shown as text, not taken as markup
    assert "<script>" not in text


def test_the_audit_page_escapes_findings_and_env(tmp_path):
    result = audit_report.AuditResult(image=EVIL, image_id="sha256:x", arch=None, image_arch="gfx942", arch_source="label",
                               findings=(audit_report._finding("labels", EVIL, "PRESENT", [EVIL], EVIL),), versions={EVIL: EVIL},
                               size_bytes=2**30, largest_layers=({"size": 5 * MIB, "created_by": EVIL},), labels={EVIL: EVIL},
                               packages={}, seconds=1.0, env={"X": EVIL})
    audit_report.write_report(result, tmp_path / "audit", tmp_path / "none.csv")
    html = Page((tmp_path / "audit" / "report.html").read_text())
    no_active_content(html)
    assert f"labels {EVIL} PRESENT {EVIL}" in html.all_text() and "5.0 MiB" in html.all_text()


def test_the_page_of_a_run_that_failed_before_any_image_renders():
    data = report.build(offline_plan(), BuildRecord(run_id="r1", started=0.0, started_at="now",
                                                   steps=(StepRecord("preflight", StepStatus.FAILED, 0.1, "no engine"),)),
                        failed=True, error="no engine")
    text = Page(htmlpage.build_page(data)).all_text()
    assert "Why it failed no engine" in text and "Validation did not run." in text


def test_report_html_prints_the_page_path_and_the_markdown_stays_the_default(page, capsys):
    folder, _ = page
    existing.print_report("r1")
    assert capsys.readouterr().out.startswith("# Build report: r1\n")
    existing.print_report("r1", html=True)
    assert capsys.readouterr().out == f"{(folder / 'report.html').resolve()}\n"


def test_a_report_written_before_report_html_gets_its_page_from_report_json(page, capsys):
    folder, _ = page
    (folder / "report.html").unlink()
    existing.print_report("r1", html=True)
    assert "aiter: built, 312.5 s" in Page((folder / "report.html").read_text()).all_text()


@pytest.mark.parametrize(("browser", "opened"), [("true", True), ("false", False)])
def test_open_hands_the_page_to_the_desktop_browser(page, monkeypatch, capsys, browser, opened):
    """webbrowser as it is, with $BROWSER naming a command that succeeds or fails."""
    monkeypatch.setenv("BROWSER", browser)
    monkeypatch.setattr(webbrowser, "_tryorder", None)  # read $BROWSER again
    if opened:
        existing.print_report("r1", open_page=True)
        assert capsys.readouterr().out == f"{(page[0] / 'report.html').resolve()}\n"
        return
    with pytest.raises(EnvironmentProblem, match="no web browser could open"):
        existing.print_report("r1", open_page=True)


def test_units_built_at_once_start_together_on_the_timeline_and_a_report_without_starts_lays_them_end_to_end():
    def units(start: float | None) -> list[dict]:
        return [{"name": n, "status": "built", "how": "built at once (venv, atom-layer, clean)", "seconds": 50.0,
                 **({"start_s": start} if start is not None else {})} for n in ("venv", "atom-layer", "clean")]

    def xs(data: dict) -> list[float]:
        return [r["x"] for r in htmlpage.timeline(data)["rows"] if r["kind"] == "unit"]

    step = {"name": "clean", "status": "passed", "seconds": 50.0}
    assert xs({"steps": [step], "total_seconds": 50.0, "units": units(0.0)}) == [0.0] * 3
    laid = xs({"steps": [step], "total_seconds": 50.0, "units": units(None)})
    assert laid[0] == 0.0 and laid[1] == laid[2] / 2 > 0


def test_the_route_shows_each_layers_kernels_and_marks_what_the_image_lacks(page):
    folder, html = page
    text = html.all_text()
    assert "model.layers.mlp.experts FusedMoE jit:module_moe_ck2stages MISSING" in text  # bold: what it lacks
    assert "<strong>jit:module_moe_ck2stages MISSING</strong>, triton:_topk" in (folder / "report.html").read_text()
    assert "qwen3-30b-a3b (needs a module the image lacks; tagged with --allow-unservable)" in text
    md = (folder / "report.md").read_text()
    assert "## Route of qwen3-30b-a3b" in md
    assert "| model.layers.mlp.experts | FusedMoE | jit:module_moe_ck2stages MISSING, triton:_topk |" in md

