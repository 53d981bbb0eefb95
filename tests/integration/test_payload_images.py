"""The GPU code of the offline images, read from their bytes: the release candidates carry aiter's real hsa/ kernels
for their own arch only (the clean step left the others out and listed them); derived images that carry another
arch's kernels in aiter's tree, or lack their own, are PRESENT to `audit`."""

from __future__ import annotations

import pytest

from cleanbuild.commands import audit_image
from cleanbuild.core import engine
from cleanbuild.core.metadata import PAYLOAD_LEFT_OUT_PATH, PAYLOAD_PATH
from cleanbuild.gpuhost.arch import Arch
from tests.support.derived import derived_images
from tests.support.gpucode import hip_fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HSA = "$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')/aiter_meta/hsa"
DERIVED = f"""\
ARG BASE
FROM ${{BASE}} AS foreign
RUN --mount=type=bind,source=gfx950.co,target=/tmp/k.co mkdir -p {HSA}/gfx950/pa && cp /tmp/k.co {HSA}/gfx950/pa/k.co

FROM ${{BASE}} AS lacking
RUN --mount=type=bind,source=gfx950.co,target=/tmp/k.co rm -rf {HSA}/gfx942 && mkdir -p {HSA}/gfx950/pa \\
 && cp /tmp/k.co {HSA}/gfx950/pa/k.co
"""


@pytest.mark.parametrize(("variant", "arch", "others"), [("gfx942-ck", "gfx942", {"gfx950", "gfx1250"}),
                                                          ("gfx950-ckfree", "gfx950", {"gfx942", "gfx1250"})])
def test_the_candidate_carries_its_archs_assembly_kernels_and_lists_the_rest(docker_engine, offline_builds, variant,
                                                                           arch, others):
    image = offline_builds[variant].candidate
    m = engine.read_json(docker_engine, image, PAYLOAD_PATH)
    left = engine.read_json(docker_engine, image, PAYLOAD_LEFT_OUT_PATH)
    asm = m["families"]["aiter assembly kernels"]
    assert list(asm) == [arch] and asm[arch]["files"] > 1000
    assert set(left["left_out_by_arch"]) == others and left["roots"] == ["aiter_meta/hsa"]
    # before the clean step (the wheel: all three archs) = what it kept + what it left out
    assert left["kept_by_arch"] == {arch: asm[arch]}
    assert sum(r["bytes"] for r in left["left_out_by_arch"].values()) > 50 * 2**20
    assert (m["misplaced"], m["target"]) == ([], arch)


@pytest.fixture(scope="module")
def derived(docker_engine, offline_builds, tmp_path_factory):
    folder = tmp_path_factory.mktemp("derived")
    (folder / "Dockerfile").write_text(DERIVED)
    (folder / "gfx950.co").write_bytes((hip_fixture() / "gfx950.co").read_bytes())
    with derived_images(folder, ("foreign", "lacking"), offline_builds["gfx942-ck"].candidate,
                        "atom-payload-test") as tags:
        yield tags


def _payload(result) -> dict:
    return next(f for f in result.findings if f["id"] == "payload")


def test_another_archs_code_in_aiters_tree_is_present(docker_engine, derived):
    result = audit_image.audit(derived["foreign"], arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False,
                         client=docker_engine)
    f = _payload(result)
    assert (result.exit_code, f["status"]) == (1, "PRESENT")
    assert "loader picks by arch: gfx950 1 files" in f["evidence"][0]


def test_an_aiter_without_the_targets_kernels_is_present(docker_engine, derived):
    result = audit_image.audit(derived["lacking"], arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False,
                         client=docker_engine)
    f = _payload(result)
    assert (result.exit_code, f["status"]) == (1, "PRESENT")
    assert f["evidence"][0].startswith("aiter assembly kernels: code for gfx950 (gfx950 1 files")
    assert f["evidence"][0].endswith("but none for gfx942: its first call fails or compiles at run time")


@pytest.mark.parametrize(("variant", "arch"), [("gfx942-ck", Arch.GFX942), ("gfx950-ckfree", Arch.GFX950)])
def test_the_release_candidates_payload_is_ok(docker_engine, offline_builds, variant, arch):
    result = audit_image.audit(offline_builds[variant].candidate, arch=arch, model=None, tp=(1,), report_dir=None,
                         device=False, client=docker_engine)
    f = _payload(result)
    assert f["status"] == "ok"
    assert f["evidence"][0].startswith(f"aiter assembly kernels: {arch.value} ")
