"""README.md stays a user's guide: short, no commit SHAs (history lives in CHANGELOG.md, measurements in
benchmarks/), the markers the generated tables go between, and links that lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_it_is_short():
    lines = README.count("\n")
    assert lines <= 320, f"README.md has {lines} lines (at most 320): move history to CHANGELOG.md, " \
                         "measurements to benchmarks/results.json, design to docs/"


def test_it_names_no_commit():
    shas = re.findall(r"\b[0-9a-f]{40}\b", README)
    assert not shas, f"README.md names commits {shas}: history belongs in CHANGELOG.md"


@pytest.mark.parametrize("table", ["tasks", "options"])
def test_each_generated_table_has_one_pair_of_markers(table):
    begin, end = f"<!-- {table}:begin -->", f"<!-- {table}:end -->"
    assert README.count(begin) == 1 and README.count(end) == 1
    assert README.index(begin) < README.index(end)


def test_the_everyday_test_command_is_named_plainly():
    assert "nox -s tests" in README


def test_every_local_document_it_links_exists():
    links = re.findall(r"\]\(([^)#]+\.md)\)", README)
    assert links, "README.md links no document"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README.md links missing files: {missing}"
