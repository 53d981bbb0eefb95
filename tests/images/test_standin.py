"""cleanbuild.images.standin without mmdebstrap or an engine: what the archive served is read from the hook's output,
the record is trusted only beside its tar, and the key and labels say what the base is made from.

(mmdebstrap itself and the rebuild from nothing are the integration tier's:
tests/integration/test_reproducible_digests.py.)"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild.core import metadata
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.images import plan, standin
from cleanbuild.images.plan import STANDIN_ENV, Standin, standin_image
from cleanbuild.images.report import outside_the_pins
from tests.support.tools import python_tool

# What the hook prints, written by hand in the shape of a Release file and dpkg's status (a deinstalled package and a
# multi-line description included): not copied from an archive.
SHOWN = """Origin: Debian
Label: Debian
Suite: oldstable
Codename: bookworm
Version: 12.12
Date: Sat, 08 Nov 2026 09:12:40 UTC
Architectures: amd64 arm64
MD5Sum:
 0123456789abcdef 1234 main/binary-amd64/Packages

Package: python3
Status: install ok installed
Version: 3.11.2-1+b1
Description: interactive high-level object-oriented language
 a second line: with a colon

Package: base-files
Status: install ok installed
Version: 12.4+deb12u12

Package: gone
Status: deinstall ok config-files
Version: 1.0
"""

SPEC = Standin("bookworm", ("ca-certificates", "python3"), 1_700_000_000, "sha256:" + "0" * 64)


def a_tar(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    member = path.parent / "hello.txt"
    member.write_text("hello\n")
    with tarfile.open(path, "w") as tar:
        tar.add(member, arcname="etc/hello.txt")
    return path


def test_paragraphs_keep_each_fields_first_line_by_lower_case_name():
    found = standin.paragraphs(SHOWN)
    assert [p.get("package") for p in found] == [None, "python3", "base-files", "gone"]
    assert found[0]["codename"] == "bookworm" and found[0]["md5sum"] == ""
    assert found[1]["description"] == "interactive high-level object-oriented language"


def test_archive_names_the_release_the_installed_packages_and_the_tars_sha256(tmp_path):
    tar = a_tar(tmp_path / "base.tar")
    made = standin.archive(SHOWN, tar)
    assert made["releases"] == [{"origin": "Debian", "label": "Debian", "suite": "oldstable", "codename": "bookworm",
                                 "version": "12.12", "date": "Sat, 08 Nov 2026 09:12:40 UTC"}]
    assert made["packages"] == {"python3": "3.11.2-1+b1", "base-files": "12.4+deb12u12"}  # not the deinstalled one
    assert made["tar_sha256"] == "sha256:" + hashlib.sha256(tar.read_bytes()).hexdigest()


@pytest.mark.parametrize("shown", ["", SHOWN.split("\n\n", 1)[1], SHOWN.split("\n\n", 1)[0]],
                         ids=["nothing", "no-release", "no-package"])
def test_a_hook_that_printed_no_release_or_no_package_is_one_line_naming_the_hook(tmp_path, shown):
    with pytest.raises(EnvironmentProblem, match="printed no Release file or no installed package") as err:
        standin.archive(shown, a_tar(tmp_path / "base.tar"))
    assert "\n" not in str(err.value)


def test_a_record_is_trusted_only_beside_its_tar_and_only_when_it_reads(tmp_path):
    where = tmp_path / "standin" / "abc"
    (where / "context").mkdir(parents=True)
    (where / standin.RECORD).write_text(json.dumps({"packages": {"python3": "3.11"}}))
    assert standin.record(where) is None  # no tar: a half-made folder
    a_tar(where / "context" / "base.tar")
    assert standin.record(where) == {"packages": {"python3": "3.11"}}
    (where / standin.RECORD).write_text("{not json")
    assert standin.record(where) is None
    assert standin.record(tmp_path / "nowhere") is None


def test_the_folder_is_named_by_the_images_key():
    image = standin_image(SPEC)
    assert standin.folder(Path("/cache"), image) == Path("/cache/standin") / image.rsplit(":", 1)[1]


@pytest.mark.parametrize("change", [{"suite": "trixie"}, {"packages": ("python3",)}, {"epoch": 1},
                                    {"dockerfile": "sha256:" + "1" * 64}], ids=lambda c: next(iter(c)))
def test_the_images_name_moves_with_every_input_it_is_made_from(change):
    assert standin_image(replace(SPEC, **change)) != standin_image(SPEC)
    assert standin_image(replace(SPEC)) == standin_image(SPEC)


def test_labels_say_what_the_key_covers_and_what_the_archive_gave(tmp_path):
    made = standin.archive(SHOWN, a_tar(tmp_path / "base.tar"))
    labels = dict(standin.labels(SPEC, made))
    assert json.loads(labels[metadata.STANDIN_INPUTS]) == SPEC.inputs()
    assert labels[metadata.STANDIN_TAR] == made["tar_sha256"]
    assert labels[metadata.STANDIN_DEBS] == "base-files=12.4+deb12u12 python3=3.11.2-1+b1"  # sorted by name


def test_the_reports_line_names_the_archives_release_or_where_to_read_it(tmp_path):
    made = standin.archive(SHOWN, a_tar(tmp_path / "base.tar"))
    line = outside_the_pins(made)
    assert "bookworm 12.12 of Sat, 08 Nov 2026 09:12:40 UTC" in line and "2 packages" in line
    assert made["tar_sha256"] in line and "not pinned" in line
    assert metadata.STANDIN_DEBS in outside_the_pins(None)


# A stand-in for mmdebstrap (the real one is the integration tier's): it keeps the environment it was given and its
# argv, writes an empty tar where the last argument says, and prints what the hook would.
FAKE_MMDEBSTRAP = """import json, os, sys, tarfile
with open({seen!r}, "w") as out:
    json.dump({{"env": dict(os.environ), "argv": sys.argv[1:]}}, out)
tarfile.open(sys.argv[-1], "w").close()
sys.stderr.write({begin!r} + "\\n" + {shown!r} + {end!r} + "\\n")
"""


def test_mmdebstrap_runs_with_its_own_environment_and_only_the_callers_tmpdir_and_proxy(tmp_path, monkeypatch):
    """The caller's Python variables changed the tar (2026-12-05: PYTHONDONTWRITEBYTECODE unset by nox, set in a
    shell): mmdebstrap and every maintainer script get plan.STANDIN_ENV and SOURCE_DATE_EPOCH, whatever the caller has."""
    (bin_dir := tmp_path / "bin").mkdir()
    python_tool(bin_dir / "mmdebstrap", FAKE_MMDEBSTRAP.format(seen=str(tmp_path / "seen.json"), begin=standin.BEGIN,
                                                              shown=SHOWN, end=standin.END))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    for name, value in (("PYTHONPYCACHEPREFIX", "/elsewhere"), ("PYTHONHASHSEED", "7"), ("https_proxy", "http://p:3128"),
                        ("TMPDIR", str(tmp_path))):
        monkeypatch.setenv(name, value)
    made = standin.make(SPEC, tmp_path / "cache" / "standin" / "abc")
    seen = json.loads((tmp_path / "seen.json").read_text())
    # CPython may coerce the C locale; the tool's sh wrapper (tests.support.tools) exports PWD
    env = {k: v for k, v in seen["env"].items() if k not in ("LC_CTYPE", "PWD")}
    assert env == {**dict(STANDIN_ENV), "SOURCE_DATE_EPOCH": "1700000000", "https_proxy": "http://p:3128",
                   "TMPDIR": str(tmp_path)}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and seen["argv"][-2] == "bookworm"
    assert made["packages"] == {"python3": "3.11.2-1+b1", "base-files": "12.4+deb12u12"}
    assert standin.record(tmp_path / "cache" / "standin" / "abc") == made


def test_the_images_name_moves_with_mmdebstraps_environment(monkeypatch):
    before = standin_image(SPEC)
    monkeypatch.setattr(plan, "STANDIN_ENV", (*STANDIN_ENV[:-1], ("PYTHONDONTWRITEBYTECODE", "")))
    assert standin_image(SPEC) != before


def test_the_record_counts_how_each_pyc_is_checked(tmp_path):
    """PEP 552's flags word: 0 by the source's time (what a maintainer script's Python wrote), 3 a checked hash
    (py3compile under SOURCE_DATE_EPOCH); other files are not read."""
    tar = tmp_path / "base.tar"
    with tarfile.open(tar, "w") as out:
        for name, flags in (("a.pyc", 0), ("b.pyc", 3), ("c.pyc", 3), ("d.py", 0), ("e.pyc", 7)):
            data = b"\xa7\r\r\n" + flags.to_bytes(4, "little") + b"\0" * 8
            info = tarfile.TarInfo(f"./usr/lib/__pycache__/{name}")
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    assert standin.archive(SHOWN, tar)["pyc"] == {"checked hash": 2, "flags 7": 1, "source time": 1}
