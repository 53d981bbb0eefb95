"""The clean step's prune on aiter's real hsa/ at the pin, installed as a wheel would leave it, and the judge that
audit and validation share, on the trees before and after."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from validation.gpucode.judge import AITER_NEEDS, OK, PRESENT, judge, status
from validation.gpucode.prune import PruneError, prune
from validation.gpucode.scan import TRITON_CACHE, manifest, scan
from validation.payload import main


@pytest.fixture(scope="session")
def pristine_hsa(pristine_aiter_hsa) -> Path:
    return pristine_aiter_hsa  # never changed: each test prunes hard links to it


@pytest.fixture
def site(pristine_hsa, tmp_path) -> Path:
    """A site-packages with aiter_meta/hsa/ (hard links to the pristine copy) and a RECORD listing it."""
    site = tmp_path / "opt" / "venv" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(pristine_hsa, site / "aiter_meta" / "hsa", copy_function=lambda s, d: Path(d).hardlink_to(s))
    info = site / "amd_aiter-0.1.20.dist-info"
    info.mkdir()
    rows = sorted(str(p.relative_to(site)) for p in (site / "aiter_meta").rglob("*") if p.is_file())
    (info / "RECORD").write_text("".join(f"{r},sha256=x,1\n" for r in ["aiter/__init__.py", *rows])
                                 + "amd_aiter-0.1.20.dist-info/RECORD,,\n")
    return site


def _judged(root: Path, target: str):
    m = manifest(scan([root], root=root), target=target, roots=["/"])
    return m, judge(m, target)


def test_before_the_prune_a_gfx942_tree_carries_foreign_assembly_kernels(site, tmp_path):
    m, verdicts = _judged(tmp_path, "gfx942")
    asm = next(v for v in verdicts if v.name == "aiter assembly kernels")
    assert (status(verdicts), asm.status) == (PRESENT, PRESENT)
    assert asm.line == ("aiter assembly kernels: gfx942 1427 files 53.7 MiB, and another arch's beside it where the "
                        "loader picks by arch: gfx1250 35 files 2.9 MiB, gfx950 1407 files 53.8 MiB")
    assert m["families"]["aiter assembly kernels"]["gfx942"] == {"files": 1427, "bytes": m["archs"]["gfx942"]["bytes"]}


@pytest.mark.parametrize(("target", "gone"), [("gfx942", {"gfx950", "gfx1250"}), ("gfx950", {"gfx942", "gfx1250"})])
def test_the_prune_keeps_only_the_target_and_lists_what_it_left_out(site, tmp_path, target, gone):
    before, _ = _judged(tmp_path, target)
    record = prune(site, target)
    after, verdicts = _judged(tmp_path, target)
    assert set(after["archs"]) == {target}
    assert after["archs"][target] == before["archs"][target]
    assert {a: r["bytes"] for a, r in record["left_out_by_arch"].items()} == {a: before["archs"][a]["bytes"] for a in gone}
    assert record["kept_by_arch"] == {target: {"files": before["archs"][target]["files"],
                                               "bytes": before["archs"][target]["bytes"]}}
    assert len(record["left_out"]) == sum(before["archs"][a]["files"] for a in gone)
    assert status(verdicts) == OK
    assert (site / "aiter_meta" / "hsa" / "codegen.py").is_file()


def test_the_prune_drops_the_removed_files_from_the_record(site):
    prune(site, "gfx950")
    rows = (site / "amd_aiter-0.1.20.dist-info" / "RECORD").read_text().splitlines()
    listed = {r.split(",")[0] for r in rows}
    on_disk = {str(p.relative_to(site)) for p in (site / "aiter_meta").rglob("*") if p.is_file()}
    assert listed - {"aiter/__init__.py", "amd_aiter-0.1.20.dist-info/RECORD"} == on_disk
    assert not any("/gfx942/" in r for r in listed)


def test_a_tree_without_the_target_arch_stops_the_prune(site):
    shutil.rmtree(site / "aiter_meta" / "hsa" / "gfx942")
    with pytest.raises(PruneError) as info:
        prune(site, "gfx942")
    assert str(info.value).startswith("aiter_meta/hsa holds kernels for gfx1250, gfx950 but none for gfx942")
    assert (site / "aiter_meta" / "hsa" / "gfx950").is_dir()


def test_the_judge_says_when_the_family_lacks_the_images_arch(site, tmp_path):
    shutil.rmtree(site / "aiter_meta" / "hsa" / "gfx942")
    _, verdicts = _judged(tmp_path, "gfx942")
    asm = next(v for v in verdicts if v.name == "aiter assembly kernels")
    assert asm.status == PRESENT
    assert asm.line.startswith("aiter assembly kernels: code for gfx1250, gfx950 (")
    assert asm.line.endswith("but none for gfx942: its first call fails or compiles at run time")


def test_a_code_object_in_another_archs_folder_is_misplaced(site, tmp_path):
    hsa = site / "aiter_meta" / "hsa"
    stray = next((hsa / "gfx950" / "pa").glob("*.co"))
    # gfx942/pa/ holds a file of that name: a hard link to the session's pristine tree, so it is replaced, never
    # written into (copying over it would turn the pristine gfx942 kernel into gfx950 code for every later test).
    (hsa / "gfx942" / "pa" / stray.name).unlink(missing_ok=True)
    shutil.copy(stray, hsa / "gfx942" / "pa" / stray.name)
    prune(site, "gfx942")
    m, verdicts = _judged(tmp_path, "gfx942")
    shown = "/" + str((hsa / "gfx942" / "pa" / stray.name).relative_to(tmp_path))
    assert m["misplaced"] == [{"path": shown, "folder_arch": "gfx942", "arch": "gfx950"}]
    assert [v.line for v in verdicts if v.name == "misplaced"] == [f"{shown} is gfx950 code in a folder named gfx942"]


def test_prune_on_the_command_line_writes_the_record(site, tmp_path, capsys):
    out = tmp_path / "left-out.json"
    assert main(["prune", "--site", str(site), "--arch", "gfx942", "--json-file", str(out)]) == 0
    assert out.read_text().count('"arch": "gfx950"') == 1407
    assert capsys.readouterr().err.splitlines()[0] == "left out gfx1250: 35 code objects, 3003432 bytes"


def test_an_installed_aiter_with_no_assembly_kernels_at_all_is_present_for_its_arch(tmp_path):
    """No other arch's folder left, none for the image's either: aiter's loader finds nothing (the 'prebuilt with
    zero kernels' image). Where aiter is not installed (a source tree) the family is not needed."""
    (tmp_path / "site").mkdir()
    m = manifest(scan([tmp_path / "site"], root=tmp_path), target="gfx950", roots=["/"])
    asm = next(v for v in judge(m, "gfx950", AITER_NEEDS) if v.name == "aiter assembly kernels")
    assert (asm.status, asm.line) == (PRESENT, "aiter assembly kernels: none for gfx950 (none at all) where the "
                                               "runtime needs them: its loader finds no kernel for the arch, a "
                                               "'prebuilt' image with zero kernels")
    assert next(v for v in judge(m, "gfx950") if v.name == "aiter assembly kernels").status == OK


def test_a_triton_cache_for_another_arch_only_is_present(site, tmp_path):
    """The warm step's cache (/opt/atom-build/triton-cache) is a family of its own: code for gfx950 alone in a gfx942
    image is a cache that serves no kernel."""
    stray = next((site / "aiter_meta" / "hsa" / "gfx950" / "pa").glob("*.co"))
    cache = tmp_path / "opt" / "atom-build" / "triton-cache" / "KEY"
    cache.mkdir(parents=True)
    shutil.copy(stray, cache / "_kernel.hsaco")
    m = manifest(scan([tmp_path / "opt" / "atom-build"], root=tmp_path), target="gfx942", roots=["/"])
    verdict = next(v for v in judge(m, "gfx942") if v.name == TRITON_CACHE)
    assert verdict.status == PRESENT and verdict.line.startswith("Triton cache: code for gfx950 (gfx950 1 files")
