"""invoke build-clean end to end on the real engine (offline profile): tag only what passed, report, cleanup."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.tiny_model import make_tiny_model

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


RUN = os.urandom(3).hex()  # tags from earlier runs of this file must not satisfy (or fail) these assertions


def build_clean(*args: str, user: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--progress", "plain",
            "--user", f"{user}-{RUN}", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "CI": "true"})


def tags(client, repo_prefix: str) -> list[str]:
    return sorted(t for image in client.images.list() for t in image.tags if t.startswith(repo_prefix))


def our_containers(client) -> list[str]:
    return [c.name for c in client.containers.list(all=True) if c.name.startswith(("atom-validate-", "atom-smoke-"))]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_build_clean_tags_and_reports(docker_engine, model, arch):
    result = build_clean("--arch", arch, "--model", str(model), user="ci-pass")
    assert result.returncode == 0, result.stderr[-4000:]
    released = tags(docker_engine, f"atom-build/atom-{arch}:ci-pass-{RUN}_")
    assert released, result.stderr[-2000:]
    tag = released[-1].split(":", 1)[1]
    assert len(tag) <= 128 and "_rocmna_aiter0.1.7.post2.dev18_atom0.1.0" in tag
    folder = ROOT / "reports" / f"atom-{arch}" / tag
    report = json.loads((folder / "report.json").read_text())
    assert report["arch"] == arch and report["image_size_bytes"] > 0 and report["total_seconds"] > 0
    assert [s["name"] for s in report["steps"]] == ["preflight", "wheels", "clean", "patch", "validate", "smoke", "tag", "report"]
    assert report["wheels_manifest_digest"].startswith("sha256:") and report["largest_layers"]
    # Validation ran inside the image, on the CPU, for this arch; every check has a verdict.
    validation = report["validation"]
    assert validation["arch"] == arch and validation["device"] == "cpu" and validation["exit_code"] == 0
    assert {c["name"] for c in validation["checks"]} >= {"arch-consistency", "gemm-triton", "moe-triton"}
    assert all(c["status"] in ("passed", "skipped") for c in validation["checks"])
    # The smoke test really generated tokens with the model we made.
    assert report["smoke"]["status"] == "passed" and report["smoke"]["result"]["new_tokens"] >= 10
    # The patches ran against the real aiter wheel inside the image.
    outcomes = {p["name"]: p["outcome"] for p in report["patches"]["patches"]}
    assert outcomes["tuned-gemm-hipblaslt"] in ("applied", "already-applied")
    assert outcomes["jit-core-runtime-error"] in ("applied", "already-applied")
    assert outcomes["atom-ck-free-triton-gemm"] in ("applied", "already-applied")
    labels = docker_engine.images.get(released[-1]).labels
    assert labels["io.atom-build.arch"] == arch and labels["io.atom-build.wheels-manifest-digest"] == report["wheels_manifest_digest"]
    assert (folder / "report.md").read_text().startswith("# Build report")
    shown = subprocess.run([sys.executable, "-m", "invoke", "report", released[-1]], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0 and "## Validation" in shown.stdout + shown.stderr
    assert our_containers(docker_engine) == []


def test_validation_failure_leaves_no_release_tag(docker_engine, model):
    # An image whose environment lists two archs: aiter would take the last one. Validation must stop it.
    result = build_clean("--arch", "gfx942", "--model", str(model), "--set", "validation.env.GPU_ARCHS=gfx942;gfx950",
                         user="ci-badarch")
    assert result.returncode == 1, result.stderr[-3000:]
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: validation failed inside the image") and "arch-consistency" in last
    assert tags(docker_engine, f"atom-build/atom-gfx942:ci-badarch-{RUN}") == []
    kept = re.search(r"candidate kept as (\S+) for debugging", result.stderr)
    assert kept and kept.group(1).endswith("-failed") and kept.group(1) in tags(docker_engine, "atom-build/atom-gfx942:")
    failed_report = re.search(r"report of the failed build: (\S+)", result.stderr)
    data = json.loads((Path(failed_report.group(1)) / "report.json").read_text())
    assert data["status"] == "failed" and data["tag"] is None
    assert [s["status"] for s in data["steps"]][-1] == "failed" and data["steps"][-1]["name"] == "validate"
    assert any(c["name"] == "arch-consistency" and c["status"] == "failed" for c in data["validation"]["checks"])
    assert our_containers(docker_engine) == []
    assert "Traceback" not in result.stderr


def test_failing_smoke_leaves_no_release_tag(docker_engine, model):
    result = build_clean("--arch", "gfx942", "--model", str(model), "--set", "smoke.min_tokens=1000", user="ci-badsmoke")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "smoke test failed" in result.stderr
    assert tags(docker_engine, f"atom-build/atom-gfx942:ci-badsmoke-{RUN}") == []
    assert our_containers(docker_engine) == []


def test_no_model_means_no_release_tag_unless_allowed(docker_engine):
    result = build_clean("--arch", "gfx942", user="ci-nosmoke")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no --model given" in result.stderr
    assert tags(docker_engine, f"atom-build/atom-gfx942:ci-nosmoke-{RUN}") == []
    allowed = build_clean("--arch", "gfx942", "--allow-no-smoke", user="ci-nosmoke")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert len(tags(docker_engine, f"atom-build/atom-gfx942:ci-nosmoke-{RUN}")) == 1


def test_single_step_tasks_on_a_clean_image(docker_engine, model):
    """A developer iterating on one step: patch one patch onto the clean image, smoke it, see its tag."""
    from cleanbuild import offline, profiles
    from cleanbuild.arch import Arch
    from cleanbuild.plan import Options, make_plan

    plan = make_plan(profiles.load("offline"), Options(arch=Arch.GFX950, context=offline.sources_dir(),
                                                       base_image=offline.standin_image_name()))
    if not docker_engine.images.list(name=plan.clean.image):
        assert build_clean("--arch", "gfx950", user="ci-steps").returncode == 0
    patched = invoke("patch", "--image", plan.clean.image, "--only", "jit-core-runtime-error")
    assert patched.returncode == 0, patched.stderr[-2000:]
    target = plan.clean.image + "-patched"
    report = json.loads(docker_engine.containers.run(target, ["cat", "/opt/atom-build/patches.json"], remove=True))
    assert [(p["name"], p["outcome"]) for p in report["patches"]] == [("jit-core-runtime-error", "applied")]
    smoke = invoke("smoke", "--image", target, "--model", str(model), "--profile", "offline")
    assert smoke.returncode == 0 and "10 new tokens" in smoke.stderr, smoke.stderr[-2000:]
    shown = invoke("tag", "--image", target, "--user", "Dr. Who", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "atom-build/atom-gfx950:Dr.-Who_" in shown.stderr and "made tag-safe" in shown.stderr
    assert not [t for i in docker_engine.images.list() for t in i.tags if t.startswith("atom-build/atom-gfx950:Dr.-Who_")]


def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "CI": "true"})


def test_ctrl_c_removes_containers_and_leaves_no_release_tag(docker_engine, model):
    # A smoke command that hangs: Ctrl-C arrives while its container runs.
    argv = [sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--arch", "gfx942",
            "--model", str(model), "--user", f"ci-intr-{RUN}", "--progress", "plain",
            "--set", "smoke.command=python -c 'import time; time.sleep(120)'"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,  # noqa: S603
                            start_new_session=True, env={**os.environ, "CI": "true"})
    try:
        deadline = time.monotonic() + 600
        while not any(n.startswith("atom-smoke-") for n in our_containers(docker_engine)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err.splitlines()[-1]
    assert our_containers(docker_engine) == []
    assert tags(docker_engine, f"atom-build/atom-gfx942:ci-intr-{RUN}") == []


def test_two_builds_at_once_do_not_collide(docker_engine, model):
    runs = [subprocess.Popen([sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--arch", arch,  # noqa: S603
                              *extra, "--model", str(model), "--user", f"ci-twin-{RUN}", "--progress", "plain"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "CI": "true"})
            for arch, extra in (("gfx942", ()), ("gfx942", ("--ck-free",)))]
    results = [(p, *p.communicate(timeout=1800)) for p in runs]
    for proc, _, err in results:
        assert proc.returncode == 0, err[-3000:]
    assert len(tags(docker_engine, f"atom-build/atom-gfx942:ci-twin-{RUN}_")) == 1
    assert len(tags(docker_engine, f"atom-build/atom-gfx942-ckfree:ci-twin-{RUN}_")) == 1
    assert our_containers(docker_engine) == []


def test_wheels_task_reuses_by_content_key_and_exports(docker_engine, tmp_path):
    import hashlib

    first = invoke("wheels", "--profile", "offline", "--arch", "gfx942", "--export", str(tmp_path / "out"))
    assert first.returncode == 0, first.stderr[-3000:]
    again = invoke("wheels", "--profile", "offline", "--arch", "gfx942")
    assert again.returncode == 0 and "an image with this content key exists" in again.stderr
    manifest = json.loads((tmp_path / "out" / "wheels" / "manifest.json").read_text())
    assert manifest["wheels"]
    for wheel in manifest["wheels"]:
        data = (tmp_path / "out" / "wheels" / wheel["filename"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == wheel["sha256"], wheel["filename"]


def test_matrix_builds_missing_wheels_images_together(docker_engine, model):
    from cleanbuild import offline, profiles
    from cleanbuild.arch import Arch
    from cleanbuild.plan import Options, make_plan

    images = [make_plan(profiles.load("offline"), Options(arch=a, ck_free=True, context=offline.sources_dir(),
                                                          base_image=offline.standin_image_name())).wheels.image
              for a in Arch]
    for image in images:
        if docker_engine.images.list(name=image):
            docker_engine.images.remove(image, force=True)
    result = build_clean("--arch", "gfx942,gfx950", "--ck-free", "--model", str(model), user="ci-matrix")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "building 2 wheels images at once" in result.stderr
    assert all(docker_engine.images.list(name=image) for image in images)
    for arch in ("gfx942", "gfx950"):
        assert len(tags(docker_engine, f"atom-build/atom-{arch}-ckfree:ci-matrix-{RUN}_")) == 1
