"""Real GPU code for the payload tests: aiter's hsa/ at the pin (from ../shared/upstream, read at test time) and
the HIP objects .ci/hip-fixture.sh compiles with Debian's hipcc 7.2.4 (gfx942 and gfx950, plain and compressed
bundles), with llvm-readelf's own text for both, to compare against."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.upstream import AITER_PIN

FIXTURE_ENV = "ATOM_BUILD_HIP_FIXTURE"
FIXTURE_DEFAULT = Path("/var/cache/atom-build/hip-fixture")
MIRROR = Path(__file__).resolve().parents[3] / "shared" / "upstream"


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


def hip_fixture() -> Path:
    """The folder .ci/hip-fixture.sh wrote (a skip without it; a failure when CI=true)."""
    folder = Path(os.environ.get(FIXTURE_ENV) or FIXTURE_DEFAULT)
    if not (folder / "DONE").is_file():
        _missing(f"no HIP fixture at {folder}: run `bash .ci/hip-fixture.sh {folder}` (needs root, mmdebstrap)")
    return folder


def aiter_hsa(dest: Path) -> Path:
    """aiter's hsa/ at the pin, unpacked under dest (dest/hsa)."""
    git_dir = Path(os.environ.get("ATOM_BUILD_MIRROR") or MIRROR) / "aiter.git"
    if not git_dir.is_dir():
        _missing(f"{git_dir} is missing (set ATOM_BUILD_MIRROR to the folder holding aiter.git)")
    archive = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={git_dir}", "archive", AITER_PIN, "hsa"],  # noqa: S603,S607
                             capture_output=True, check=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)  # noqa: S603,S607
    return dest / "hsa"


def aiter_asm_sample(site: Path, arch: str) -> Path:
    """The smallest real assembly kernel of arch in aiter's hsa/ at the pin, where an installed aiter keeps them
    (site/aiter_meta/hsa/<arch>/...): an image's site for that arch, not a source tree's."""
    path, data = _smallest_asm(arch)
    dest = site / "aiter_meta" / path
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest


@functools.cache
def _smallest_asm(arch: str) -> tuple[str, bytes]:
    git_dir = Path(os.environ.get("ATOM_BUILD_MIRROR") or MIRROR) / "aiter.git"
    if not git_dir.is_dir():
        _missing(f"{git_dir} is missing (set ATOM_BUILD_MIRROR to the folder holding aiter.git)")
    git = ["git", "-c", "safe.directory=*", f"--git-dir={git_dir}"]
    rows = subprocess.run([*git, "ls-tree", "-r", "-l", AITER_PIN, f"hsa/{arch}/"], capture_output=True,  # noqa: S603
                          text=True, check=True).stdout.splitlines()
    _, blob, path = min((int(r.split()[3]), r.split()[2], r.split("\t")[1]) for r in rows if r.endswith(".co"))
    return path, subprocess.run([*git, "cat-file", "blob", blob], capture_output=True, check=True).stdout  # noqa: S603


@pytest.fixture(scope="session")
def pristine_aiter_hsa(tmp_path_factory) -> Iterator[Path]:
    """aiter's hsa/ at the pin, unpacked once per session for every payload test (116 MB): read it, or copy it
    (hard links do: the prune removes files, it never writes into one) before changing anything. A test that wrote
    into it after all (through a hard link) fails the session's teardown, naming the files."""
    hsa = aiter_hsa(tmp_path_factory.mktemp("aiter"))
    before = _stamps(hsa)
    yield hsa
    after = _stamps(hsa)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert changed == [], f"a test changed the shared pristine hsa/ (write into a copy, not a hard link): {changed[:5]}"


def _stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


FLAGS = re.compile(r"^\s*Flags:\s+(0x[0-9a-fA-F]+)(?:, (.*))?$")
ABI = re.compile(r"^\s*ABI Version:\s+(\d+)$")


def readelf_headers(text: str) -> dict[str, tuple[int, str, str, str, int]]:
    """llvm-readelf --file-header output of many files ('File: PATH' before each) -> PATH -> (e_flags, arch,
    xnack, sramecc, code object version), the feature words as llvm-readelf prints them mapped to any/on/off."""
    out: dict[str, tuple[int, str, str, str, int]] = {}
    path, abi = "", 0
    for line in text.splitlines():
        if line.startswith("File: "):
            path = line[6:]
        elif m := ABI.match(line):
            abi = int(m.group(1))
        elif m := FLAGS.match(line):
            words = [w.strip() for w in (m.group(2) or "").split(",")]
            out[path] = (int(m.group(1), 16), words[0], _feature(words, "xnack"), _feature(words, "sramecc"), abi + 2)
    return out


def _feature(words: list[str], name: str) -> str:
    for w in words:
        if w == name:
            return "any"
        if w in (name + "+", name + "-"):
            return "on" if w.endswith("+") else "off"
    return "unsupported"
