"""benchmarks/README.md is generated from benchmarks/results.json by benchmarks/render.py: it never drifts from the
measurements, and every row names its date and the command that measured it."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.scripts import BENCH, load_bench

render = load_bench("render")
results_file = load_bench("results_file")


def results() -> dict:
    return json.loads((BENCH / "results.json").read_text())


def test_the_page_is_the_scripts_output():
    expected = render.render(results())
    assert (BENCH / "README.md").read_text() == expected, (
        "benchmarks/README.md differs from what benchmarks/results.json renders to: "
        "run `python benchmarks/render.py --write`")


@pytest.mark.parametrize("name", sorted(results()["benchmarks"]))
def test_every_row_names_its_date_and_command(name):
    entry = results()["benchmarks"][name]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry["date"])
    assert entry["engine"] and entry["command"]
    rows = [line for line in render.section(name, entry, results()["machine"]) if line.startswith("| ")
            and "---" not in line][1:]
    assert rows, f"{name} renders no row"
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[2].startswith(entry["date"]), row
        assert cells[3].startswith("`") and ("benchmarks/" in cells[3] or ".ci/run" in cells[3]), row


def test_every_section_names_its_machine():
    data = results()
    data["benchmarks"]["tier_gc"] = {**data["benchmarks"]["tier_gc"], "machine": "NVIDIA H200 (16 CPU cores)"}
    page = render.render(data)
    assert f"Machine: {data['machine']}." in page and "Machine: NVIDIA H200 (16 CPU cores). Engine" in page


def test_a_benchmark_the_script_does_not_know_is_refused():
    data = results()
    data["benchmarks"]["warp-speed"] = {"date": "2026-12-02", "command": "x", "engine": "y", "result": {}}
    with pytest.raises(SystemExit, match="benchmark 'warp-speed' this script does not know"):
        render.render(data)


def test_a_new_run_keeps_the_one_it_replaces_under_superseded(tmp_path):
    path = tmp_path / "results.json"
    first = {"date": "2026-12-01", "command": "python benchmarks/bench_build.py --only noop", "engine": "e",
             "result": {"wall_s": 1.0}}
    second = {**first, "date": "2026-12-02", "result": {"wall_s": 0.5}}
    results_file.record(path, "noop", first)
    results_file.record(path, "noop", second)
    data = json.loads(path.read_text())
    assert data["benchmarks"]["noop"] == second
    assert data["superseded"] == [{"name": "noop", **first}]
    assert results_file.current(path, "noop") == {"wall_s": 0.5}
    assert "0.5 s" in render.render(data)
