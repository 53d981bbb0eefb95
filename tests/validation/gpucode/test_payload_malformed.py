"""Bad input to the payload reader: each a line in the manifest's unknown list (or nothing, where the file holds
no GPU code), never a traceback, never a whole-file read. Hand-written bytes only here, where the input is broken;
the well-formed ones start from real hipcc output (.ci/hip-fixture.sh) and break one field of it."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from tests.support.gpucode import hip_fixture
from validation.gpucode.bundle import CCOB, MAGIC
from validation.gpucode.scan import manifest, scan

REPO = Path(__file__).resolve().parents[3]


def _unknown(tmp_path: Path) -> dict[str, str]:
    m = manifest(scan([tmp_path], root=tmp_path), target="gfx942", roots=["/"])
    return {u["path"]: u["why"] for u in m["unknown"]}


def test_a_truncated_elf_header_is_listed(tmp_path):
    (tmp_path / "k.co").write_bytes(b"\x7fELF\x02\x01\x01\x40" + b"\0" * 20)
    assert _unknown(tmp_path) == {"/k.co": "truncated ELF header (28 bytes)"}


def test_section_headers_past_the_end_are_listed(tmp_path):
    head = bytearray((hip_fixture() / "bundle.so").read_bytes()[:64])
    struct.pack_into("<Q", head, 40, 10**9)  # e_shoff far past the end
    (tmp_path / "m.so").write_bytes(bytes(head))
    assert _unknown(tmp_path)["/m.so"].startswith("section headers (31 x 64 at 1000000000) run past the end")


def test_a_bundle_whose_entry_points_past_its_end_is_listed(tmp_path):
    data = bytearray((hip_fixture() / "bundle.fatbin").read_bytes())
    # entry 2's size (host, gfx942, gfx950: 24 + 8 + (24 + len(triple)) per entry before it)
    at = len(MAGIC) + 8 + 24 + len("host-x86_64-unknown-linux-gnu-") + 8
    struct.pack_into("<Q", data, at, 10**9)
    (tmp_path / "b.hipfb").write_bytes(bytes(data))
    assert _unknown(tmp_path) == {"/b.hipfb": "entry hipv4-amdgcn-amd-amdhsa--gfx942 (1000000000 bytes at 4096) runs "
                                              "past the bundle's 26000 bytes"}


def test_a_bundle_claiming_a_billion_entries_is_listed(tmp_path):
    (tmp_path / "b.hipfb").write_bytes(MAGIC + struct.pack("<Q", 10**9))
    assert _unknown(tmp_path) == {"/b.hipfb": "offload bundle claims 1000000000 entries"}


def _ccob(payload: bytes, claimed: int, method: int = 0) -> bytes:
    body = zlib.compress(payload)
    return CCOB + struct.pack("<HHQQQ", 3, method, 32 + len(body), claimed, 0) + body


def test_a_compressed_bundle_that_claims_less_than_it_holds_is_listed(tmp_path):
    plain = (hip_fixture() / "bundle.fatbin").read_bytes()
    (tmp_path / "c.hipfb").write_bytes(_ccob(plain, 100))
    why = _unknown(tmp_path)["/c.hipfb"]
    assert why == "the compressed bundle inflates past the 100 bytes it claims"


def test_a_compressed_bundle_that_claims_more_than_it_holds_is_listed(tmp_path):
    plain = (hip_fixture() / "bundle.fatbin").read_bytes()
    (tmp_path / "c.hipfb").write_bytes(_ccob(plain[:20000], len(plain)))
    assert _unknown(tmp_path) == {"/c.hipfb": "the compressed bundle ends at 20000 bytes, it claims 26000"}


def test_a_compressed_bundle_that_is_not_compressed_data_is_listed(tmp_path):
    (tmp_path / "c.hipfb").write_bytes(CCOB + struct.pack("<HHQQQ", 3, 0, 32 + 64, 4096, 0) + b"\xff" * 64)
    assert _unknown(tmp_path)["/c.hipfb"].startswith("the compressed bundle does not decompress: ")


def test_an_unknown_ccob_version_is_listed(tmp_path):
    (tmp_path / "c.hipfb").write_bytes(CCOB + struct.pack("<HHQQQ", 9, 0, 0, 0, 0))
    assert _unknown(tmp_path) == {"/c.hipfb": "CCOB version 9 is not one this reader knows (1-3)"}


def test_a_symlink_loop_is_listed_and_a_dangling_link_is_not(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    assert _unknown(tmp_path) == {"/a": "symlink loop", "/b": "symlink loop"}


def test_a_two_gigabyte_sparse_file_is_read_by_its_header(tmp_path):
    big = tmp_path / "sparse.so"
    with big.open("wb") as fh:
        fh.write((hip_fixture() / "gfx950.co").read_bytes()[:64])
        fh.truncate(2 * 2**30)
    m = manifest(scan([tmp_path], root=tmp_path), target="gfx942", roots=["/"])
    assert (m["archs"]["gfx950"]["bytes"], m["unknown"]) == (2 * 2**30, [])


@pytest.fixture
def open_folder():
    """A folder other users can enter (pytest's tmp_path is root's alone), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="payload-unreadable-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("runuser"), reason="root needs runuser to read as another user")
def test_an_unreadable_file_is_listed(open_folder):
    secret = open_folder / "k.co"
    shutil.copy(hip_fixture() / "gfx942.co", secret)
    secret.chmod(0o000)
    # root reads every file: another user is what makes the open fail for real (EACCES), not a mock
    # The reader as an image runs it: the package copied where that user can read it (the checkout may sit in a
    # folder only its owner enters), run from there.
    code = Path(tempfile.mkdtemp(prefix="payload-reader-"))
    shutil.copytree(REPO / "validation", code / "validation", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a+rX", str(code)], check=True)  # noqa: S603,S607
    argv = ["python3", "-m", "validation.payload", "scan", str(open_folder)]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "nobody", "--", *argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=code, check=False,  # noqa: S603
                              env={**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        shutil.rmtree(code)
    assert (proc.returncode, proc.stderr.splitlines()[-1]) == (0, f"unknown        {secret}: unreadable: Permission denied")
    assert "Traceback" not in proc.stderr


def test_the_command_line_refuses_a_missing_path_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "validation.payload", "scan", str(tmp_path / "no")], cwd=REPO,  # noqa: S603
                          capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stderr) == (2, f"python -m validation.payload: error: {tmp_path / 'no'} does not "
                                                 "exist. To fix, see --help\n")
