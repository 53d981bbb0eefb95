"""The payload reader on real AMDGPU code: every code object in aiter's hsa/ at the pin and the HIP objects Debian's
hipcc 7.2.4 compiled for gfx942 and gfx950 (.ci/hip-fixture.sh), each compared with llvm-readelf's own reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gpucode import hip_fixture, readelf_headers
from validation.gpucode.bundle import read_bundle
from validation.gpucode.elf import amdgpu_target, parse_header, sections
from validation.gpucode.read import read
from validation.gpucode.scan import manifest, scan


@pytest.fixture(scope="session")
def hsa(pristine_aiter_hsa) -> Path:
    return pristine_aiter_hsa  # only read here


@pytest.fixture(scope="session")
def fixture() -> Path:
    return hip_fixture()


def _ours(path: Path) -> tuple[int, str, str, str, int]:
    header = parse_header(path.read_bytes()[:64])
    t = amdgpu_target(header)
    return header.flags, t.arch, t.xnack, t.sramecc, t.code_object


def test_every_code_object_in_aiters_hsa_reads_as_llvm_readelf_says(hsa, fixture):
    expected = readelf_headers((fixture / "aiter-hsa-readelf.txt").read_text())
    elf = [p for p in sorted(hsa.rglob("*")) if p.is_file() and parse_header(p.read_bytes()[:64])]
    seen = {str(p.relative_to(hsa.parent)): _ours(p) for p in elf}
    assert len(seen) == 2869  # 2,867 *.co and two more by their bytes (pa/*.co.orig, *.co.poc_kl_merg)
    assert seen == expected


def test_aiters_hsa_by_arch_matches_the_folders_it_sits_in(hsa):
    m = manifest(scan([hsa], root=hsa.parent), target="gfx942", roots=["/hsa"])
    assert {a: r["files"] for a, r in m["archs"].items()} == {"gfx1250": 35, "gfx942": 1427, "gfx950": 1407}
    assert {a: r["bytes"] for a, r in m["archs"].items()} == {
        a: sum(p.stat().st_size for p in (hsa / a).rglob("*") if ".co" in p.name) for a in ("gfx1250", "gfx942", "gfx950")}
    assert (m["misplaced"], m["unknown"], m["files_read"]) == ([], [], 2978)


@pytest.mark.parametrize("name", ["gfx942", "gfx950", "gfx942-xnack", "gfx942-v5"])
def test_hipcc_code_objects_read_as_llvm_readelf_says(fixture, name):
    expected = readelf_headers((fixture / "readelf" / f"{name}.txt").read_text())[""]
    assert _ours(fixture / f"{name}.co") == expected


def test_the_xnack_object_is_named_with_its_feature(fixture):
    [piece] = read(fixture / "gfx942-xnack.co", (fixture / "gfx942-xnack.co").stat().st_size)
    assert (piece.arch, piece.target, piece.how, piece.code_object) == ("gfx942", "gfx942:xnack+", "code-object", 6)


def _listed(fixture: Path, dump: str) -> list[str]:
    """The triples `clang-offload-bundler --list` printed for a dumped .hip_fatbin (bundles.txt)."""
    text = (fixture / "bundles.txt").read_text()
    block = text.split(f"--input={dump}\n", 1)[1].split("\n\n", 1)[0]
    return sorted(line for line in block.splitlines() if line)


def _readelf_section(fixture: Path, so: str, name: str) -> tuple[int, int]:
    """(offset, size) of a section as `llvm-readelf --sections` printed it (bundles.txt)."""
    block = (fixture / "bundles.txt").read_text().split(f"llvm-readelf --sections {so}\n", 1)[1]
    row = next(line for line in block.splitlines() if f"] {name} " in line).split("]", 1)[1].split()
    return int(row[3], 16), int(row[4], 16)


@pytest.mark.parametrize("so", ["bundle.so", "bundle-compressed.so"])
def test_both_entries_of_a_hipcc_bundle_are_read_from_the_shared_object(fixture, so):
    path = fixture / so
    pieces = read(path, path.stat().st_size)
    device = (fixture / "gfx942.co").stat().st_size
    assert [(p.arch, p.target, p.size, p.how, p.code_object) for p in pieces] == [
        ("gfx942", "gfx942", device, "bundle", 6), ("gfx950", "gfx950", device, "bundle", 6)]
    assert {p.compression for p in pieces} == ({"zstd"} if "compressed" in so else {None})


@pytest.mark.parametrize("dump", ["bundle.fatbin", "bundle-compressed.fatbin"])
def test_the_entry_triples_are_the_ones_the_bundler_lists(fixture, dump):
    with (fixture / dump).open("rb") as fh:
        bundle = read_bundle(fh, 0, (fixture / dump).stat().st_size)
    assert sorted(e.triple for e in bundle.entries) == _listed(fixture, dump)
    assert [e.triple_arch for e in bundle.entries] == [None, "gfx942", "gfx950"]


@pytest.mark.parametrize("so", ["bundle.so", "bundle-compressed.so"])
def test_the_fat_binary_section_is_where_llvm_readelf_puts_it(fixture, so):
    path = fixture / so
    with path.open("rb") as fh:
        found = sections(fh, parse_header(fh.read(64)), path.stat().st_size)
    assert found[".hip_fatbin"] == _readelf_section(fixture, so, ".hip_fatbin")


def test_each_file_at_a_sites_top_keeps_its_own_owner(hsa, tmp_path):
    """The owner is asked once a folder, except at a site's top, where each file's own name is what RECORD lists."""
    site = tmp_path / "opt" / "venv" / "lib" / "python3.12" / "site-packages"
    code = next(p for p in sorted(hsa.rglob("*.co")) if p.is_file()).read_bytes()
    for dist, files in (("alpha", ["a.co", "pkg/x.co", "pkg/y.co"]), ("beta", ["b.co"])):
        for name in files:
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_bytes(code)
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "RECORD").write_text("".join(f"{name},,\n" for name in files))
    owners = {f.path.rsplit("/", 1)[1]: f.owner for f in scan([site], root=tmp_path).found}
    assert owners == {"a.co": "alpha", "b.co": "beta", "x.co": "alpha", "y.co": "alpha"}
