"""The audit on the real engine, on images this repo did not build: no labels, no versions.json, a venv holding
the real aiter (79366eb8) and ATOM (181b0f46) sources as installed distributions, on the offline stand-in base.

Four variants of one Dockerfile: unpatched (pitfalls PRESENT, exit 1), patched at build time (exit 0),
GPU_ARCHS="gfx942;gfx950" (that pitfall PRESENT) and two distributions owning triton/ (PRESENT, both named).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import threading
import time
import uuid

import pytest
from audit_helpers import REPO, install_files, install_tree
from rich.console import Console

from cleanbuild.commands import audit_image, audit_report
from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.core.spec import RunSpec
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import prepare
from cleanbuild.images.plan import make_plan
from cleanbuild.upstream import profiles
from tests.support.containers import left_by, record_run_ids
from tests.support.derived import derived_images
from tests.support.gpucode import aiter_asm_sample
from tests.support.requests import build_of

pytestmark = pytest.mark.docker

PURELIB = "\"$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')\""
DOCKERFILE = f"""\
ARG BASE
FROM ${{BASE}} AS unpatched
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    GPU_ARCHS=gfx942 PYTORCH_ROCM_ARCH=gfx942 ENABLE_CK=0 ATOM_CK_FREE=1
RUN python3 -m venv /opt/venv
RUN --mount=type=bind,source=site,target=/tmp/site cp -a /tmp/site/. {PURELIB}/

FROM unpatched AS patched
RUN --mount=type=bind,source=patches,target=/tmp/p/patches \\
    PYTHONPATH=/tmp/p PYTHONDONTWRITEBYTECODE=1 python -m patches apply --root {PURELIB}

FROM patched AS two-archs
ENV GPU_ARCHS="gfx942;gfx950"

FROM patched AS two-tritons
RUN --mount=type=bind,source=tritons,target=/tmp/t cp -a /tmp/t/. {PURELIB}/
ENTRYPOINT ["/bin/false"]
VOLUME /data
"""
VARIANTS = ("unpatched", "patched", "two-archs", "two-tritons")


def build_context(folder, upstream):
    (folder / "Dockerfile").write_text(DOCKERFILE)
    shutil.copytree(REPO / "patches", folder / "patches", ignore=shutil.ignore_patterns("__pycache__"))
    site = folder / "site"
    install_tree(site, "amd-aiter", "0.1.20.dev0+g79366eb8", upstream / "aiter", "aiter")
    install_tree(site, "atom", "0.1.1.dev1+g181b0f46", upstream / "atom", "atom")
    aiter_asm_sample(site, "gfx942")  # an installed aiter carries its arch's assembly kernels (one real one here)
    files = {"triton/__init__.py": "__version__ = '3.6.0'\n", "triton/language/__init__.py": ""}
    install_files(folder / "tritons", "triton", "3.6.0", files)
    install_files(folder / "tritons", "pytorch-triton-rocm", "3.5.0", files)


@pytest.fixture(scope="module")
def audit_base(docker_engine) -> str:
    """The offline profile's stand-in base (Debian 12, python3, venv; ~30 s the first time, then cached)."""
    plan = make_plan(profiles.load("offline"), build_of(Arch.GFX942))
    return prepare.ensure_standin(plan.prepare, plan.options.request.cache_dir,
                                  lambda ref: engine.image_id(docker_engine, ref) is not None)


@pytest.fixture(scope="module")
def images(audit_base, upstream_packages, tmp_path_factory):
    """variant -> image tag, built once; every image is removed at the end of the module."""
    folder = tmp_path_factory.mktemp("audit-images")
    build_context(folder, upstream_packages)
    with derived_images(folder, VARIANTS, audit_base, "atom-audit-test") as built:
        yield built


def run_audit(tag, tmp_path=None, **kw):
    args = {"arch": Arch.GFX942, "model": None, "tp": (1,), "report_dir": tmp_path, "device": False, **kw}
    return audit_image.audit(tag, **args)


def present(result) -> dict[str, list[str]]:
    return {f["id"]: f["evidence"] for f in result.present}


def screen(result) -> str:
    console = Console(record=True, width=120, color_system=None)
    console.print(audit_report.table(result, width=120))
    return console.export_text()


def test_unpatched_image_has_the_pitfalls(images, tmp_path):
    result = run_audit(images["unpatched"], tmp_path / "report")
    print(screen(result))
    found = present(result)
    assert (result.exit_code, sorted(found)) == (1, ["ck-free", "tuned-gemm-default"])
    assert found["tuned-gemm-default"][0].startswith("patch would apply: ")
    assert found["ck-free"][0] == "ATOM_CK_FREE=1 but use_triton_gemm() ignores it"
    assert result.packages["aiter"]["dist"] == "amd-aiter 0.1.20.dev0+g79366eb8"
    assert result.versions["source"] == "package metadata (no /opt/atom-build/versions.json)"
    assert (result.versions["aiter"], result.versions["atom"]) == ("0.1.20.dev0+g79366eb8", "0.1.1.dev1+g181b0f46")
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.startswith(f"# Audit report: {images['unpatched']}\n")
    assert "\n- GPU_ARCHS=gfx942\n" in md
    assert json.loads((tmp_path / "report" / "report.json").read_text())["exit_code"] == 1


def test_patched_image_is_clean(images):
    result = run_audit(images["patched"])
    print(screen(result))
    assert (result.exit_code, present(result)) == (0, {})
    statuses = {f["id"]: f["status"] for f in result.findings}
    assert statuses["pip-check"] == "ok"
    assert statuses["labels"] == "ok"  # no labels is fine; it says the image is not ours
    assert result.probe_python == "python"


def test_two_archs_in_gpu_archs_is_named(images):
    result = run_audit(images["two-archs"], arch=None)
    found = present(result)
    assert (result.exit_code, sorted(found)) == (1, ["gpu-archs"])
    assert found["gpu-archs"][0].startswith("GPU_ARCHS='gfx942;gfx950' lists 2 archs; aiter runs gfx950 (")
    assert (result.image_arch, result.arch_source) == ("gfx942", "PYTORCH_ROCM_ARCH=gfx942")


def test_two_distributions_owning_triton_are_named(images, docker_engine):
    """Its ENTRYPOINT is /bin/false (the probe clears it) and it declares a VOLUME (removed with the container)."""
    volumes = {v.name for v in docker_engine.volumes.list()}
    result = run_audit(images["two-tritons"])
    assert {v.name for v in docker_engine.volumes.list()} - volumes == set()
    found = present(result)
    assert (result.exit_code, sorted(found)) == (1, ["duplicate-dists"])
    assert found["duplicate-dists"] == [
        "pytorch-triton-rocm 3.5.0 and triton 3.6.0 both own 2 files, under triton/"]


def test_model_coverage_writes_the_untuned_csv(images, tmp_path):
    model = tmp_path / "Llama-3-8B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "model_type": "llama"}))
    result = run_audit(images["patched"], tmp_path / "report", model=str(model), tp=(1, 8), arch=Arch.GFX950)
    coverage = next(f for f in result.findings if f["id"] == "tuned-csv-coverage")
    assert coverage["status"] == "warning"  # 23/70: below the 90% threshold, never PRESENT
    assert coverage["evidence"][0].startswith("Llama-3-8B tp1: 23/70 shapes tuned for cu_num 256; missing ")
    with (tmp_path / "report" / "untuned-gemm.csv").open() as fh:
        rows = list(csv.reader(fh))
    assert (rows[0][:3], len(rows) - 1) == (["M", "N", "K"], 103)


def test_an_image_without_aiter_says_unknown(audit_base):
    """The bare stand-in base: only `python3`, no aiter: nothing guessed, nothing PRESENT."""
    result = run_audit(audit_base)
    statuses = {f["id"]: f["status"] for f in result.findings}
    assert result.probe_python == "python3"
    assert (statuses["tuned-gemm-default"], statuses["fp8-dtype"], result.exit_code) == ("unknown", "unknown", 0)


def test_missing_image_is_exit_3(docker_engine):
    with pytest.raises(EnvironmentProblem) as info:
        run_audit(f"atom-audit-test/absent:{uuid.uuid4().hex[:8]}")
    assert (info.value.exit_code, "never pulls" in str(info.value)) == (3, True)


def test_no_probe_container_is_left_behind(images, docker_engine, monkeypatch):
    run_ids = record_run_ids(monkeypatch)
    run_audit(images["patched"])
    assert len(run_ids) == 1 and left_by(docker_engine, run_ids) == []


def test_device_without_a_rocm_gpu_is_exit_3(images):
    if os.path.exists("/dev/kfd"):
        pytest.skip("this host has a ROCm GPU")
    with pytest.raises(EnvironmentProblem) as info:
        run_audit(images["patched"], device=True)
    assert (info.value.exit_code, "/dev/kfd" in str(info.value)) == (3, True)


def test_ctrl_c_removes_the_container(images, docker_engine):
    """A real SIGINT while the probe's container runs: KeyboardInterrupt, and the container is gone."""
    name = f"atom-audit-ctrlc-{uuid.uuid4().hex[:8]}"
    spec = RunSpec(step="audit", name=name, command=("python3", "-c", "import time; time.sleep(60)"), workdir="/")

    def interrupt_when_running():
        for _ in range(200):
            if docker_engine.containers.list(ignore_removed=True, filters={"name": name, "status": "running"}):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        audit_image.run_sealed(docker_engine, images["patched"], spec)
    assert docker_engine.containers.list(all=True, ignore_removed=True, filters={"name": name}) == []
