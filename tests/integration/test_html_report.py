"""report.html of a real offline build, opened in headless Chromium: the DOM the browser builds holds the run's
steps, its layer sizes and its validation rows, and the page draws (a screenshot with content)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cleanbuild.images import htmlpage, pipeline
from tests.support.builds import offline_plan
from tests.support.htmlpage import Page

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and chromium is not installed (.ci/run installs it)", pytrace=False)
        pytest.skip("chromium is not installed (apt-get install --no-install-recommends chromium)")
    return found


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *flags, page.as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True, cwd=page.parent)  # noqa: S603


@pytest.fixture(scope="module")
def built_page(docker_engine, offline_builds) -> Path:
    """The session's gfx950 CK-free build, validated and reported by the pipeline's own steps."""
    built = offline_builds["gfx950-ckfree"]
    plan = offline_plan(built.variant, allow_unservable=True)  # the route check warns: its section on the page
    rec = pipeline.run(plan, docker_engine, ("validate", "report"), rec=built.record, failed_report=False)
    return Path(rec.steps[-1].detail) / "report.html"


def test_chromium_reads_the_steps_layers_and_validation_rows(built_page):
    data = json.loads(built_page.with_name("report.json").read_text())
    dom = Page(browse(built_page, "--dump-dom").stdout)
    text = dom.all_text()
    bars = [a for tag, a in dom.tags if tag == "g" and a.get("class", "").startswith("bar ")]
    assert len(bars) == len(data["steps"]) + len(data["units"])
    for step in data["steps"]:
        assert f"{step['name']}: {step['status']}, {step['seconds']} s" in text
    assert data["layer_sizes"] and all(s["unit"] for s in data["layer_sizes"])
    for layer in sorted(data["layer_sizes"], key=lambda s: -s["size"])[:5]:
        assert f"{htmlpage.HOLDS[layer['unit']]} {htmlpage.mib(layer['size'])}" in text
    for check in data["validation"]["checks"]:
        assert f"{check['name']} {check['status']}" in text
    assert "jit:module_moe_ck2stages MISSING" in text  # the route's section: what the CK-free image lacks
    assert [t for t, _ in dom.tags if t == "script"] == []


def test_chromium_draws_the_page(built_page, tmp_path):
    shot = tmp_path / "report.png"
    browse(built_page, f"--screenshot={shot}", "--window-size=1400,2400")
    raw = shot.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(raw) > 50_000  # a blank or unstyled page compresses to a few KB
