"""cleanbuild.core.atomic.replace_all: several files replaced as one change, or none of them."""

from __future__ import annotations

import errno
import os

import pytest

from cleanbuild.core.atomic import replace_all


@pytest.fixture
def pair(tmp_path):
    a, b = tmp_path / "x.lock", tmp_path / "x.build.lock"
    a.write_text("old a\n")
    b.write_text("old b\n")
    return a, b


def contents(folder) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_every_file_is_replaced(pair):
    a, b = pair
    replace_all({a: "new a\n", b: b"new b\n"})
    assert contents(a.parent) == {"x.build.lock": "new b\n", "x.lock": "new a\n"}


def test_a_failed_second_rename_puts_the_first_back(pair, monkeypatch):
    a, b = pair
    real, calls = os.replace, []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError, match="Input/output error"):
        replace_all({a: "new a\n", b: "new b\n"})
    assert contents(a.parent) == {"x.build.lock": "old b\n", "x.lock": "old a\n"}


def test_a_full_disk_while_staging_changes_nothing_and_names_the_target(pair, monkeypatch):
    a, b = pair
    real, calls = os.fsync, []

    def full(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        replace_all({a: "new a\n", b: "new b\n"})
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(b))
    assert contents(a.parent) == {"x.build.lock": "old b\n", "x.lock": "old a\n"}


def test_a_new_file_is_created_and_the_mode_of_an_old_one_kept(pair, tmp_path):
    a, _ = pair
    a.chmod(0o640)
    fresh = tmp_path / "new.toml"
    replace_all({a: "new a\n", fresh: "fresh\n"})
    assert (a.stat().st_mode & 0o777, fresh.read_text()) == (0o640, "fresh\n")
