"""invoke build-clean end to end on the real engine (offline profile): tag only what passed, report, clean up.

Through the real CLI (`python -m invoke`) where only a process proves it (exit codes, Ctrl-C); in-process where a
fault must be injected at an exact point (Ctrl-C after the tag step).
"""

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

from cleanbuild.commands import audit_report
from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import Interrupted
from cleanbuild.images import pipeline, sbom
from tests.support.builds import REPO, offline_plan
from tests.support.tiny_model import make_tiny_model
from tests.support.upstream import AITER_PIN, ATOM_PIN

pytestmark = [pytest.mark.docker, pytest.mark.slow]
RUN = os.urandom(3).hex()  # tags from earlier runs must not satisfy (or fail) these assertions


def invoke(*args: str, env: dict | None = None, timeout: int = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "CI": "true", **(env or {})})


def build_clean(*args: str, user: str) -> subprocess.CompletedProcess:
    return invoke("build-clean", "--profile", "offline", "--progress", "plain", "--user", f"{user}-{RUN}", *args)


def tags(client, prefix: str) -> list[str]:
    return sorted(t for image in client.images.list() for t in image.tags if t.startswith(prefix))


def our_containers(client) -> list[str]:
    """Ours by name; ignore_removed: one that goes away between the list and its inspect (a --rm run ending) made
    this helper raise mid-test, and the test's SIGKILL then left a build's container behind (2026-12-01)."""
    return [c.name for c in client.containers.list(all=True, ignore_removed=True)
            if c.name.startswith(("atom-validate-", "atom-smoke-", "atom-read-"))]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    # A ':' in the path: docker's `-v host:container` syntax would split it; the SDK's Mount takes it as it is.
    return make_tiny_model(tmp_path_factory.mktemp("model") / "tiny:llama")


# CK-free at the pins, no preset's route is served by what the image has (validation's route check): the release
# needs --allow-unservable, and the route check warns (test_an_unservable_ck_free_build_stops_before_the_tag).
@pytest.mark.parametrize("arch,flags,repo", [("gfx950", ("--ck-free", "--allow-unservable"), "atom-gfx950-ckfree"),
                                             ("gfx942", (), "atom-gfx942")])
def test_build_clean_tags_and_reports(docker_engine, offline_builds, model, arch, flags, repo):
    result = build_clean("--arch", arch, *flags, "--model", str(model), user="ci-pass")
    assert result.returncode == 0, result.stderr[-4000:]
    released = tags(docker_engine, f"atom-build/{repo}:ci-pass-{RUN}_")
    assert len(released) == 1, result.stderr[-2000:]
    tag = released[0].split(":", 1)[1]
    # The tag names the real versions the image reports: no ROCm in the stand-in, aiter and ATOM from the pins.
    assert re.fullmatch(rf"ci-pass-{RUN}_\d{{8}}_rocmna_aiter0\.1\.20\.dev38-g79366eb8\d?_atom0\.1\.1\.dev\d+-g181b0f4\w*", tag), tag
    folder = REPO / "reports" / repo / tag
    report = json.loads((folder / "report.json").read_text())
    assert report["status"] == "passed" and report["tag"] == released[0]
    assert [s["name"] for s in report["steps"]] == ["preflight", "prepare", "wheels", "clean", "patch", "validate",
                                                   "smoke", "tag", "report"]
    assert report["sources"]["aiter"]["sha"] == AITER_PIN and report["sources"]["atom"]["sha"] == ATOM_PIN
    assert report["versions"]["commits"]["aiter"]["sha"] == AITER_PIN
    assert report["lock_sha256"].startswith("sha256:") and report["wheels_manifest_digest"].startswith("sha256:")
    assert report["image_size_bytes"] > 0 and report["largest_layers"] and report["total_seconds"] > 0
    assert any("AITER_TRITON_ONLY" in s for s in report["offline_substitutes"])
    validation = report["validation"]
    assert validation["arch"] == arch and validation["device"] == "cpu" and validation["exit_code"] == 0
    statuses = {c["name"]: c["status"] for c in validation["checks"]}
    # The pin's tuned CSV covers few of the model's shapes (0-23 of 70): a warning, which never stops the build.
    assert statuses.pop("tuned-csv-coverage") == "warning"
    assert statuses.pop("route") == ("warning" if "--ck-free" in flags else "passed")
    assert set(statuses.values()) <= {"passed", "skipped"}, statuses
    route = report["route"]
    assert [m["model"] for m in route["models"]] == ["qwen3-30b-a3b", "warm-model"]  # --model's config
    assert route["allowed_unservable"] is ("--ck-free" in flags)
    smoke = report["smoke"]["result"]
    assert report["smoke"]["status"] == "passed" and smoke["new_tokens"] == 10 and smoke["mode"] == "cpu"
    assert smoke["not_proved"] and "ATOM's engine generating" in smoke["not_proved"][0]
    labels = docker_engine.images.get(released[0]).labels
    assert labels["io.atom-build.arch"] == arch and labels["io.atom-build.wheels-manifest-digest"] == report["wheels_manifest_digest"]
    markdown = (folder / "report.md").read_text()
    assert markdown.startswith("# Build report") and "## Smoke test" in markdown and "NOT proved" in markdown
    shown = invoke("report", released[0])
    assert shown.returncode == 0 and "## Validation" in shown.stdout
    # The SBOM names aiter's and ATOM's full commits; on an engine that builds reproducibly it is also attached.
    bom = json.loads((folder / "sbom.cdx.json").read_text())
    commits = {c["name"]: p["value"] for c in bom["components"] for p in c.get("properties", [])
               if p["name"] == "io.atom-build:commit"}
    assert (commits["amd-aiter"], commits["atom"]) == (AITER_PIN, ATOM_PIN)
    reproducible = engine.preflight(docker_engine, 1.0).reproducible
    assert report["attestations"] == ([sbom.SBOM, sbom.PROVENANCE] if reproducible else [])
    finding = audit_report.supply_chain_finding(report["image_id"], REPO / "reports")
    assert finding["status"] == "ok" and finding["evidence"][-1].startswith("attached to the image") == reproducible
    assert our_containers(docker_engine) == []


def test_validation_failure_leaves_no_release_tag(docker_engine, offline_builds, model):
    # An image whose environment lists two archs: aiter would take the last one. Validation must stop it.
    result = build_clean("--arch", "gfx950", "--ck-free", "--allow-unservable", "--model", str(model),
                         "--set", "validation.env.GPU_ARCHS=gfx942;gfx950", user="ci-badarch")
    assert result.returncode == 1, result.stderr[-3000:]
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: validation failed inside the image") and "arch-consistency" in last
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-badarch-{RUN}") == []
    kept = re.search(r"candidate kept as (\S+);", result.stderr)
    assert kept and kept.group(1).endswith("-failed") and kept.group(1) in tags(docker_engine, "atom-build/atom-gfx950-ckfree:")
    folder = re.search(r"report (\S+-failed)", result.stderr).group(1)
    data = json.loads((Path(folder) / "report.json").read_text())
    assert data["status"] == "failed" and data["tag"] is None and data["steps"][-1]["name"] == "validate"
    assert [c["status"] for c in data["validation"]["checks"] if c["name"] == "arch-consistency"] == ["failed"]
    assert our_containers(docker_engine) == [] and "Traceback" not in result.stderr


def test_an_unservable_ck_free_build_stops_before_the_tag(docker_engine, offline_builds, model):
    """CK-free at the pins, Qwen3-30B-A3B (the offline profile's warm model) reaches CK modules the build left out
    (attention's KV-cache write module_cache; its experts layer CK 2-stage MoE through FusedMoE's fp8 methods):
    validation's route check fails, naming the layer, the op and the module, and nothing is tagged."""
    result = build_clean("--arch", "gfx950", "--ck-free", "--model", str(model), user="ci-unservable")
    assert result.returncode == 1, result.stderr[-3000:]
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: validation failed inside the image: route (failed:") and "module_" in last
    assert "cannot serve qwen3-30b-a3b" in last and "--allow-unservable" in last
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-unservable-{RUN}_") == []
    folder = re.search(r"report (\S+-failed)", result.stderr).group(1)
    data = json.loads((Path(folder) / "report.json").read_text())
    experts = [lr for m in data["route"]["models"] if m["model"] == "qwen3-30b-a3b" for lr in m["layers"]
               if lr["layer"] == "model.layers.mlp.experts"]
    assert experts and "jit:module_moe_ck2stages MISSING" in experts[0]["kernels"]
    assert our_containers(docker_engine) == []


def test_failing_smoke_leaves_no_release_tag(docker_engine, offline_builds, model):
    # ATOM's own engine on the CPU stand-in: it imports aiter, which needs ROCm, so generation fails for real.
    result = build_clean("--arch", "gfx950", "--ck-free", "--allow-unservable", "--model", str(model), "--set",
                         "smoke.mode=atom", user="ci-badsmoke")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "error: the smoke test failed (exit 1)" in result.stderr
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-badsmoke-{RUN}") == []
    assert our_containers(docker_engine) == []


def test_no_model_means_no_release_tag_unless_allowed(docker_engine, offline_builds):
    result = build_clean("--arch", "gfx950", "--ck-free", "--allow-unservable", user="ci-nosmoke")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no --model given" in result.stderr
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-nosmoke-{RUN}") == []
    allowed = build_clean("--arch", "gfx950", "--ck-free", "--allow-unservable", "--allow-no-smoke", user="ci-nosmoke")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert len(tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-nosmoke-{RUN}")) == 1


def test_single_step_tasks_on_a_clean_image(docker_engine, offline_builds, model):
    """A developer iterating on one step: one patch onto the clean image, smoke it, validate it, see its tag."""
    clean = offline_builds["gfx950-ckfree"].clean
    patched = invoke("patch", "--image", clean, "--only", "jit-core-runtime-error")
    assert patched.returncode == 0, patched.stderr[-2000:]
    target = clean + "-patched"
    report = json.loads(engine.read_file(docker_engine, target, metadata.PATCHES_PATH))
    assert [(p["name"], p["outcome"]) for p in report["patches"]] == [("jit-core-runtime-error", "upstream-fixed")]
    smoke = invoke("smoke", "--image", target, "--model", str(model), "--profile", "offline")
    assert smoke.returncode == 0 and "10 new tokens" in smoke.stderr, smoke.stderr[-2000:]
    shown = invoke("tag", "--image", target, "--user", "Dr. Who", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "atom-build/atom-gfx950-ckfree:Dr.-Who_" in shown.stderr and "made tag-safe" in shown.stderr
    assert not tags(docker_engine, "atom-build/atom-gfx950-ckfree:Dr.-Who_")
    validated = subprocess.run([sys.executable, "-m", "cleanbuild.cli.validate", "--image", target, "--device", "cpu",
                                "--json-file", str(model.parent / "v.json"), "--", "--only", "arch-consistency"],
                               cwd=REPO, capture_output=True, text=True, timeout=600)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert [c["name"] for c in json.loads((model.parent / "v.json").read_text())["checks"]] == ["arch-consistency"]
    # The user's image keeps its names: a single step never tags it -failed nor removes it.
    assert docker_engine.images.get(target)
    docker_engine.images.remove(target)


def stop(proc) -> None:
    """A build this test started and did not finish: Ctrl-C first (its cleanup removes its containers), SIGKILL
    only when that does not end it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_ctrl_c_removes_containers_and_leaves_no_release_tag(docker_engine, offline_builds, model):
    argv = [sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--arch", "gfx950", "--ck-free",
            "--allow-unservable", "--model", str(model), "--user", f"ci-intr-{RUN}", "--progress", "plain"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,  # noqa: S603
                            start_new_session=True, env={**os.environ, "CI": "true"})
    try:
        deadline = time.monotonic() + 900
        while not any(n.startswith("atom-validate-") for n in our_containers(docker_engine)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        stop(proc)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err.splitlines()[-1] and "no release tag" in err.splitlines()[-1]
    assert our_containers(docker_engine) == []
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-intr-{RUN}") == []


def test_ctrl_c_after_the_tag_step_removes_the_release_tag(docker_engine, offline_builds, model, monkeypatch):
    """Defect 1: a Ctrl-C between tagging and the report left the release tag while saying 'no release tag'."""
    plan = offline_plan(offline_builds["gfx950-ckfree"].variant, run_id=f"ci-late-{RUN}", model=model,
                        user=f"ci-late-{RUN}", allow_unservable=True)

    def interrupted_report(ctx, rec):
        raise KeyboardInterrupt

    monkeypatch.setitem(pipeline.STEPS, "report", interrupted_report)
    with pytest.raises(Interrupted) as info:
        pipeline.run(plan, docker_engine, plan.steps)
    assert "removed the release tag" in str(info.value) and str(info.value).endswith("no release tag.")
    assert tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-late-{RUN}") == [
        f"atom-build/atom-gfx950-ckfree:ci-late-{RUN}-gfx950-ckfree-failed"]
    assert our_containers(docker_engine) == []
    assert list((REPO / "reports" / "atom-gfx950-ckfree").glob(f"ci-late-{RUN}*-failed/report.json"))


def test_two_builds_at_once_do_not_collide(docker_engine, offline_builds, model):
    runs = [subprocess.Popen([sys.executable, "-m", "invoke", "build-clean", "--profile", "offline", "--arch", arch,  # noqa: S603
                              *extra, "--model", str(model), "--user", f"ci-twin-{RUN}", "--progress", "plain"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "CI": "true"})
            for arch, extra in (("gfx942", ()), ("gfx950", ("--ck-free", "--allow-unservable")))]
    for proc in runs:
        _, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, err[-3000:]
    assert len(tags(docker_engine, f"atom-build/atom-gfx942:ci-twin-{RUN}_")) == 1
    assert len(tags(docker_engine, f"atom-build/atom-gfx950-ckfree:ci-twin-{RUN}_")) == 1
    assert our_containers(docker_engine) == []


def test_wheels_task_reuses_by_key_and_exports(docker_engine, offline_builds, tmp_path):
    import hashlib

    first = invoke("wheels", "--profile", "offline", "--arch", "gfx950", "--ck-free", "--export", str(tmp_path / "out"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert ("found here by key: builder, builder-git, torch, triton, deps, sdists, atom, aiter, mori, installer, wheels"
            in first.stderr)
    manifest = json.loads((tmp_path / "out" / "wheels" / "manifest.json").read_text())
    for wheel in manifest["wheels"]:
        data = (tmp_path / "out" / "wheels" / wheel["layer"] / wheel["filename"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == wheel["sha256"], wheel["filename"]
    refused = invoke("wheels", "--profile", "offline", "--arch", "gfx950", "--ck-free", "--export", str(tmp_path / "out"))
    assert refused.returncode == 2 and "exists and is not empty" in refused.stderr


def test_no_engine_is_exit_3_before_any_preparation(tmp_path):
    """Defect 8: with no engine, `invoke wheels` spent 49 s in mmdebstrap, then crashed with exit 1."""
    started = time.monotonic()
    result = invoke("wheels", "--profile", "offline", "--arch", "gfx942",
                    env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}, timeout=120)
    assert result.returncode == 3, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the Docker engine is not reachable")
    assert time.monotonic() - started < 60


def test_matrix_rebuilds_only_what_is_missing(docker_engine, offline_builds, model):
    """The two wheels assemblies removed: the matrix rebuilds them from the component images it finds by key."""
    from tests.support.builds import Variant, forget

    plans = [offline_plan(Variant(a, True)) for a in ("gfx942", "gfx950")]
    images = [p.wheels.image for p in plans]
    # Every image of the two keys, by every name (images are found by key, whatever the name: a registry run adds
    # names, and a run before this one on the same engine may have left another image of the key).
    forget(docker_engine, [plan.unit("wheels") for plan in plans])
    result = build_clean("--arch", "gfx942,gfx950", "--ck-free", "--allow-unservable", "--model", str(model),
                         user="ci-matrix")
    assert result.returncode == 0, result.stderr[-3000:]
    wheels_lines = [ln for ln in result.stderr.splitlines() if re.match(r"(\[[\w-]+\] )?✓ wheels \(", ln)]
    # The matrix's own pass builds (both variants at once, each in its own thread, its lines labelled);
    # build-clean's steps after it find everything by key.
    built: dict[str, list[str]] = {}
    for line in (ln for ln in wheels_lines if "built: " in ln):
        label = re.match(r"\[([\w-]+)\] ", line)
        built[label.group(1) if label else ""] = line.split("built: ", 1)[1].split(";")[0].split(", ")
    assert set(built) == {"gfx942-ckfree", "gfx950-ckfree"}, wheels_lines
    assert all("wheels" in names for names in built.values()), wheels_lines
    assert "aiter" not in built["gfx950-ckfree"]  # the session built the Triton-only aiter (one for every variant)
    assert all(engine.image_id(docker_engine, image) for image in images)
    for arch in ("gfx942", "gfx950"):
        assert len(tags(docker_engine, f"atom-build/atom-{arch}-ckfree:ci-matrix-{RUN}_")) == 1
