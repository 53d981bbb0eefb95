"""The reproducible build path without an engine: which engines take it, the flags it adds, and how two layers'
files are compared (cleanbuild.core.engine, buildx, reproduce; the image store it exports into: test_imagestore.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import zstandard

from cleanbuild.core.engine import reproducible_builds
from cleanbuild.images import buildx_argv, reproduce


@pytest.mark.parametrize(("version", "store", "builder", "expected"), [
    ("26.1.5+dfsg1", True, None, True),  # Debian 13's engine with the containerd store: measured
    ("29.0.0", True, None, True),
    ("26.1.5+dfsg1", False, None, False),  # the classic store gives a loaded OCI archive another ID
    ("20.10.24+dfsg1", False, None, False),  # BuildKit 0.8: no rewrite-timestamp
    ("25.0.3", True, None, False),
    ("26.1.5", True, "farm", False),  # a named builder's BuildKit version is unknown
])
def test_reproducible_builds_only_on_docker_26_with_the_containerd_store(version, store, builder, expected):
    assert reproducible_builds(version, store, builder) is expected


def test_reproducible_flags_set_the_epoch_and_export_into_the_store_without_a_rewrite_pass(tmp_path):
    # The Dockerfiles set the files' times (docker/scripts/clamp_times.py, tests/scripts/test_clamp_times.py).
    flags = buildx_argv.image_store(tmp_path / "m.json")
    assert flags == ("--build-arg", f"SOURCE_DATE_EPOCH={buildx_argv.SOURCE_DATE_EPOCH}", "--provenance=false",
                     "--metadata-file", str(tmp_path / "m.json"), "--output",
                     "type=image,oci-mediatypes=true,compression=zstd")


def test_diff_files_names_the_first_path_and_the_fields_that_differ():
    a = {"opt/venv/a.py": ("h1", 0o644, 0, 0, 315532800), "opt/venv/b.py": ("h2", 0o644, 0, 0, 315532800)}
    b = {"opt/venv/a.py": ("h1", 0o644, 0, 0, 315532800), "opt/venv/b.py": ("h3", 0o644, 0, 0, 1764600000)}
    assert reproduce.diff_files(a, b) == ("opt/venv/b.py", "content, mtime differ")


def test_diff_files_names_a_path_present_in_one_layer_only():
    a = {"x": ("h", 0o644, 0, 0, 0)}
    assert reproduce.diff_files(a, {**a, "w": ("h", 0o644, 0, 0, 0)}) == ("w", "only in the second image")


def test_diff_files_of_equal_layers_says_the_archive_differs():
    a = {"x": ("h", 0o644, 0, 0, 0)}
    assert reproduce.diff_files(a, dict(a)) == (None, "same files; the layer's archive differs (order or compression)")


def test_diff_files_names_a_file_before_the_folders_above_it():
    added = {"opt": ("directory", 0o755, 0, 0, 0), "opt/atom-build": ("directory", 0o755, 0, 0, 0),
             "opt/atom-build/extra.txt": ("h", 0o644, 0, 0, 0)}
    assert reproduce.diff_files(added, {}) == ("opt/atom-build/extra.txt", "only in the first image")


def _saved(path: Path, compress) -> Path:
    """A `docker save`-shaped tar (manifest.json naming one layer blob) whose layer holds one file."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("opt/atom-build/extra.txt")
        info.size, info.mtime = 8, 315532800
        tar.addfile(info, io.BytesIO(b"changed\n"))
    blob = compress(raw.getvalue())
    with tarfile.open(path, "w") as outer:
        for name, data in (("manifest.json", json.dumps([{"Layers": ["blobs/sha256/l"]}]).encode()), ("blobs/sha256/l", blob)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            outer.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("compress", [lambda b: b, gzip.compress, lambda b: zstandard.ZstdCompressor().compress(b)],
                         ids=["plain", "gzip", "zstd"])
def test_layer_files_reads_plain_gzip_and_zstd_layers(tmp_path, compress):
    files = reproduce.layer_files(_saved(tmp_path / "s.tar", compress), 0)
    assert files == {"opt/atom-build/extra.txt": (hashlib.sha256(b"changed\n").hexdigest(), 0o644, 0, 0, 315532800)}


def test_tar_files_of_two_stand_in_tars_name_the_pyc_that_differs(tmp_path):
    """The stand-in's two tars of 2026-12-05 differed in one .pyc's header (timestamped against hash-checked)."""
    def a_tar(path: Path, pyc: bytes) -> Path:
        with tarfile.open(path, "w") as tar:
            for name, data in (("./etc/os-release", b"bookworm\n"), ("./usr/lib/__pycache__/x.cpython-311.pyc", pyc)):
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), 315532800
                tar.addfile(info, io.BytesIO(data))
        return path

    first = reproduce.tar_files(a_tar(tmp_path / "a.tar", b"\xa7\r\r\n\x00\x00\x00\x00"))
    second = reproduce.tar_files(a_tar(tmp_path / "b.tar", b"\xa7\r\r\n\x03\x00\x00\x00"))
    assert first["./etc/os-release"] == (hashlib.sha256(b"bookworm\n").hexdigest(), 0o644, 0, 0, 315532800)
    assert reproduce.diff_files(first, second) == ("./usr/lib/__pycache__/x.cpython-311.pyc", "content differ")
