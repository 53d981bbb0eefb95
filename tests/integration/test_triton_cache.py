"""The Triton cache of the offline images (issue 55): the patch step's warm compiles the Triton kernels each image
runs for its arch, CK mode and models, with no GPU, into /opt/atom-build/triton-cache; validation's
first-use-compile replays the same calls and finds every kernel there. The check fails, naming kernels, on an
image built without the warm step, on a cache warmed for the other arch and under another build of Triton; a
kernel that does not compile for the arch stops the build; aiter with no assembly kernels is PRESENT to audit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cleanbuild.commands import audit_image
from cleanbuild.core import engine
from cleanbuild.core.metadata import TRITON_CACHE_PATH
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import pipeline
from tests.support.builds import VARIANTS, Variant, build_variant, offline_plan
from tests.support.derived import derived_images

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
CACHE = "/opt/atom-build/triton-cache"
DERIVED = """\
ARG BASE
FROM ${BASE} AS rebuilt-triton
# Another build of the same Triton version: one byte more in a file its own hash covers (triton_key).
RUN echo "# rebuilt" >> "$(python -c 'import triton.compiler.compiler as c; print(c.__file__)')"

FROM ${BASE} AS no-asm
RUN rm -rf "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/aiter_meta/hsa"
"""


# Beside the session's two variants: gfx942 CK-free, the CK-free path's kernels for the other arch (its wheels, venv
# and aiter wheel are the others'; its clean and patch steps are its own).
GFX942_CKFREE = Variant("gfx942", True)


@pytest.fixture(scope="module")
def candidates(docker_engine, offline_builds) -> dict[str, str]:
    """variant -> candidate image, each found by its key (or built again where an earlier test removed it)."""
    return {v.name: build_variant(docker_engine, v).plan.patch.image for v in (*VARIANTS, GFX942_CKFREE)}


def validate_here(image: str, *args: str, tmp: Path) -> dict:
    """python -m validation in a container of image, on the CPU, with this checkout's validation/ (as the validate
    step mounts it), --only first-use-compile; its JSON report."""
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{REPO / 'validation'}:/opt/atom-build/validation:ro",
            "-v", f"{tmp}:/out", "-e", "PYTHONPATH=/opt/atom-build", "-e", "PYTHONDONTWRITEBYTECODE=1", image,
            "python", "-m", "validation", "--device", "cpu", "--only", "first-use-compile", "--json-file", "/out/v.json",
            *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    assert (tmp / "v.json").is_file(), proc.stderr[-3000:]
    return next(c for c in json.loads((tmp / "v.json").read_text())["checks"] if c["name"] == "first-use-compile")


@pytest.mark.parametrize("arch", ["gfx950", "gfx942"])
def test_the_ck_free_candidate_ships_its_kernels_for_its_arch_open_to_every_user(docker_engine, candidates, arch):
    image = candidates[f"{arch}-ckfree"]
    warmed = engine.read_json(docker_engine, image, TRITON_CACHE_PATH)
    assert (warmed["target"], warmed["models"], warmed["failures"]) == (f"hip:{arch}", ["qwen3-30b-a3b"], [])
    assert warmed["kernels"] > 50 and "_fused_moe_kernel" in warmed["kinds"]
    assert list(warmed["cache"]["by_arch"]) == [arch]  # every code object's arch, read from its bytes
    assert "kernels_compiled" not in warmed  # this build's fact, not the image's: in the build log only
    env = dict(e.split("=", 1) for e in docker_engine.images.get(image).attrs["Config"]["Env"])
    assert env["TRITON_CACHE_DIR"] == CACHE
    listing = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "stat", "-c", "%a %U", CACHE],  # noqa: S607
                             capture_output=True, text=True, check=True).stdout.split()
    assert listing == ["1777", "root"]


def test_the_ck_candidate_ships_a_cache_of_what_its_dispatch_reaches(docker_engine, candidates):
    """With CK, Qwen3's experts run on CK and its bf16 layers on hipBLASLt: none of aiter's GEMM or MoE calls is
    Triton. ATOM's own masked embedding at tp 8 is, and the manifest says it is not planned."""
    warmed = engine.read_json(docker_engine, candidates["gfx942-ck"], TRITON_CACHE_PATH)
    assert (warmed["target"], warmed["kernels"], warmed["calls"]) == ("hip:gfx942", 0, 0)
    assert "triton" not in warmed["plans"][0]["dispatch"] and warmed["plans"][0]["dispatch"]["hipblaslt"] > 100
    assert [n for n in warmed["plans"][0]["not_planned"] if "masked_embedding" in n] == [
        "tp=8: ATOM's masked_embedding (atom/model_ops/embed_head.py, every forward above tp 1)"]


@pytest.mark.parametrize(("variant", "arch"), [("gfx950-ckfree", "gfx950"), ("gfx942-ck", "gfx942"),
                                               ("gfx942-ckfree", "gfx942")])
def test_first_use_compiles_nothing(candidates, variant, arch, tmp_path):
    check = validate_here(candidates[variant], "--arch", arch, tmp=tmp_path)
    result = check["metrics"]["triton_cache"]
    assert (check["status"], result["compiled_at_first_use"], result["failures"]) == ("passed", [], [])
    assert check["cases"][0]["note"].startswith(f"compiles at first use: 0 of {result['kernels']} kernels")


def test_a_cache_warmed_for_the_other_arch_is_as_good_as_none(candidates, tmp_path):
    check = validate_here(candidates["gfx950-ckfree"], "--arch", "gfx942", tmp=tmp_path)
    result = check["metrics"]["triton_cache"]
    assert check["status"] == "failed" and result["compiled_at_first_use"]
    assert all(k.startswith("_fused_moe_kernel") or k.startswith("_moe_align") for k in result["compiled_at_first_use"])
    assert "the cache was warmed for arch 'gfx950', this run is 'gfx942'" in result["why"]


@pytest.fixture(scope="module")
def derived(candidates, tmp_path_factory):
    folder = tmp_path_factory.mktemp("derived")
    (folder / "Dockerfile").write_text(DERIVED)
    with derived_images(folder, ("rebuilt-triton",), candidates["gfx950-ckfree"], "atom-cache-test") as a, \
         derived_images(folder, ("no-asm",), candidates["gfx942-ck"], "atom-cache-test") as b:
        yield {**a, **b}


def test_another_build_of_the_same_triton_finds_none_of_the_cache(derived, tmp_path):
    check = validate_here(derived["rebuilt-triton"], "--arch", "gfx950", tmp=tmp_path)
    result = check["metrics"]["triton_cache"]
    assert check["status"] == "failed" and len(result["compiled_at_first_use"]) > 10
    assert [w for w in result["why"] if w.startswith("the cache was warmed for triton_build")]


def test_an_image_built_without_the_warm_step_compiles_at_first_use(docker_engine, tmp_path):
    """warm.enabled=false: the candidate has no cache and no manifest; the check replays the model it is given."""
    plan = offline_plan(Variant("gfx950", True), overrides={"warm.enabled": "false"})
    rec = pipeline.run(plan, docker_engine, ("preflight", "prepare", "wheels", "clean", "patch"), failed_report=False)
    assert engine.read_json(docker_engine, rec.candidate(), TRITON_CACHE_PATH) is None
    check = validate_here(plan.patch.image, "--arch", "gfx950", "--model", "qwen3-30b-a3b", "--tp", "8", tmp=tmp_path)
    note = check["cases"][0]["note"]
    assert check["status"] == "failed" and "kernels compile at first use (qwen3-30b-a3b tp [8], hip:gfx950" in note
    assert "this image has no Triton cache manifest" in note and "_moe_align_block_size_stage1_kernel" in note


def test_a_kernel_that_does_not_compile_for_the_arch_stops_the_build_naming_it(docker_engine):
    """DeepSeek-V3's fp8 block-scale GEMM at M=1 does not compile for gfx950 with PyPI's Triton 3.6.0: the image
    would fail its first decode at batch 1; the patch step fails instead, naming the call."""
    plan = offline_plan(Variant("gfx950", True), overrides={"warm.models": "deepseek-v3", "warm.tp": "8"})
    with pytest.raises(Exception) as info:  # noqa: PT011 - the step's own error class is the pipeline's
        pipeline.run(plan, docker_engine, ("preflight", "prepare", "wheels", "clean", "patch"), failed_report=False)
    log = (plan.options.run_dir / "candidate.log").read_text()
    assert "the candidate build failed" in str(info.value)
    assert "does not compile for hip:gfx950: gemm_a8w8_blockscale" in log and "M=1 " in log


def test_audit_finds_an_aiter_with_no_assembly_kernels_for_its_arch(docker_engine, derived):
    result = audit_image.audit(derived["no-asm"], arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False,
                               client=docker_engine)
    payload = next(f for f in result.findings if f["id"] == "payload")
    assert (result.exit_code, payload["status"]) == (1, "PRESENT")
    assert payload["evidence"][0].startswith("aiter assembly kernels: none for gfx942 (none at all)")


def test_audit_gives_the_first_use_finding(docker_engine, candidates, derived):
    def finding(image: str, arch: Arch) -> dict:
        result = audit_image.audit(image, arch=arch, model=None, tp=(1,), report_dir=None, device=False,
                                   client=docker_engine)
        return next(f for f in result.findings if f["id"] == "first-use-compile")

    assert finding(candidates["gfx950-ckfree"], Arch.GFX950)["status"] == "ok"
    rebuilt = finding(derived["rebuilt-triton"], Arch.GFX950)
    assert rebuilt["status"] == "PRESENT" and "compile at first use" in rebuilt["evidence"][0]
