"""The report's payload section, read from what the clean step writes: validation.payload's manifest and its
prune record, made here on aiter's real hsa/ at the pin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import payload, report
from cleanbuild.images import plan as P
from cleanbuild.images.record import BuildRecord, ImageSummary
from cleanbuild.upstream import profiles
from tests.support.requests import build_of
from validation.gpucode.prune import prune
from validation.gpucode.scan import manifest, scan


@pytest.fixture(scope="module")
def written(tmp_path_factory, pristine_aiter_hsa) -> dict:
    root = tmp_path_factory.mktemp("image")
    site = root / "opt" / "venv" / "site-packages"
    # Hard links to the session's pristine hsa/: the prune below removes files and never writes into one.
    shutil.copytree(pristine_aiter_hsa, site / "aiter_meta" / "hsa", copy_function=lambda s, d: Path(d).hardlink_to(s))
    left = prune(site, "gfx942")
    m = manifest(scan([root / "opt"], root=root), target="gfx942", roots=["/opt"])
    return {"manifest": m, "left_out": left}


def test_the_section_has_the_target_only_and_what_was_left_out(written):
    p = payload.section(written)
    assert (p["target"], list(p["archs"]), p["status"]) == ("gfx942", ["gfx942"], "ok")
    assert {a: r["files"] for a, r in p["left_out_by_arch"].items()} == {"gfx1250": 35, "gfx950": 1407}
    assert p["archs"]["gfx942"]["ours_bytes"] == p["archs"]["gfx942"]["bytes"] == p["kept_by_arch"]["gfx942"]["bytes"]
    assert p["archs"]["gfx942"]["owners"] == [("aiter_meta", p["kept_by_arch"]["gfx942"])]  # no RECORD here: the top-level folder


def test_the_written_report_shows_it_in_markdown_and_html(written, tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REPORTS", tmp_path / "reports")
    image = ImageSummary(2**30, ("sha256:a",), {}, (), (), written)
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", image=image, finished=1.0)
    folder = report.write(P.make_plan(profiles.load("offline"), build_of(Arch.GFX942, run_id="r1")), rec, failed=False)
    data = json.loads((folder / "report.json").read_text())
    md = (folder / "report.md").read_text()
    assert data["payload"] == json.loads(json.dumps(payload.section(written)))
    assert f"| gfx942 | 1427 | {data['payload']['archs']['gfx942']['bytes']} |" in md
    assert "- left out by the clean step (aiter_meta/hsa): gfx950 1407 code objects, 56441192 bytes" in md
    page = report.html_page(folder / "report.json").read_text()
    assert '<section id="payload">' in page
    assert "gfx950: 1407 code objects, 53.8 MiB (aiter_meta/hsa)" in page


def test_an_image_without_a_manifest_says_so():
    assert payload.section(None) is None
    assert payload.markdown(None)[-1] == "- not read: the image has no /opt/atom-build/payload.json"
