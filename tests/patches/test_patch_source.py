"""The byte-level layer: spans, edits, line endings, atomic writes."""

from __future__ import annotations

import ast
import os
import stat

import pytest

from patches.source import Drift, Edit, Source
from patches.writer import write_atomic


def test_spans_are_bytes_so_non_ascii_lines_edit_cleanly():
    src = Source('s = "é∈"; value = 1  # ≥\n'.encode())
    value = next(n for n in ast.walk(src.tree) if isinstance(n, ast.Name) and n.id == "value")
    assert src.segment(value) == "value"
    out = src.apply([Edit(*src.span(value), "renamed")])
    assert out == 's = "é∈"; renamed = 1  # ≥\n'.encode()


def test_inserted_newlines_follow_the_file():
    src = Source(b"a = 1\r\nb = 2\r\n")
    start = src.line_start(2)
    assert src.newline == "\r\n"
    assert src.apply([Edit(start, start, "# why\n")]) == b"a = 1\r\n# why\r\nb = 2\r\n"


def test_overlapping_edits_are_refused():
    src = Source(b"a = 1\n")
    with pytest.raises(ValueError, match="overlapping"):
        src.apply([Edit(0, 3, "x"), Edit(2, 4, "y")])


@pytest.mark.parametrize(
    ("data", "line", "expected"),
    [
        (b"a = 1\nb = (\n", 2, "valid Python"),
        (b"a = 1\rb = 2\n", 1, "lone CR"),
        (b"a = 1\nb = '\xff'\n", 2, "UTF-8"),
    ],
)
def test_unreadable_sources_drift_with_a_line(data, line, expected):
    with pytest.raises(Drift) as info:
        Source(data, "x.py")
    assert info.value.line == line
    assert expected in info.value.expected


def test_write_atomic_keeps_mode_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "mod.py"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    write_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["mod.py"]


def test_write_atomic_follows_a_symlink(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_atomic(link, b"new\n")
    assert link.is_symlink()
    assert real.read_bytes() == b"new\n"


def test_interrupted_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "mod.py"
    path.write_bytes(b"old\n")

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert os.listdir(tmp_path) == ["mod.py"]
