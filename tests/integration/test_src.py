"""`--src aiter=PATH` on the real engine (offline profile): a one-line edit of the real aiter becomes a dev image.

The checkout is a clone of the real aiter at the profile's pin with a one-line edit of aiter/tuned_gemm.py, a new
file and a deleted CSV. The build runs build-clean's own steps (validation on the CPU, the dev tag, the report).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from invoke import Program

import tasks
from cleanbuild.core import engine
from cleanbuild.images import pipeline, srcplan
from cleanbuild.images.plan import make_plan
from cleanbuild.request.checkout import resolve
from tests.support.builds import VARIANTS, forget, offline_plan
from tests.support.upstream import AITER_PIN, upstream_dir

pytestmark = [pytest.mark.docker, pytest.mark.slow]
USER = f"src-{os.urandom(3).hex()}"
EDITED = "aiter/tuned_gemm.py"
ADDED = "aiter/dev_note.py"
DELETED = "aiter/configs/model_configs/a8w8_blockscale_bpreshuffle_untuned_gemm_mm2.5.csv"
# sha256 of every file of the aiter package in an image (bytecode aside): what a layer changed, file by file.
HASH_PACKAGE = ("import hashlib, json, pathlib, sysconfig; site = pathlib.Path(sysconfig.get_paths()['purelib']); "
                "print(json.dumps({str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest() "
                "for p in (site / 'aiter').rglob('*') if p.is_file() and '__pycache__' not in p.parts}))")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("src") / "aiter"
    git = ["git", "-c", "safe.directory=*", "-c", "advice.detachedHead=false"]
    subprocess.run([*git, "clone", "-q", "--no-checkout", str(upstream_dir() / "aiter.git"), str(dest)], check=True)  # noqa: S603
    subprocess.run([*git, "-C", str(dest), "checkout", "-q", AITER_PIN], check=True)  # noqa: S603
    with (dest / EDITED).open("a") as handle:
        handle.write("# a developer's one-line edit\n")
    (dest / ADDED).write_text("NOTE = 'added by a developer'\n")
    (dest / DELETED).unlink()
    return dest


@pytest.fixture(scope="module")
def dev_build(docker_engine, checkout):
    base = offline_plan(VARIANTS[0], run_id=f"{USER}-dev", user=USER, allow_unservable=True)
    found = resolve("aiter", checkout, AITER_PIN)
    plan = make_plan(base.profile, replace(base.options, src=(found,)))
    # The dev layer is what this module tests: built here, over the clean image named now. An earlier run on this
    # engine leaves one with the same key, built over a clean image that Docker 20.10 may have rebuilt since.
    forget(docker_engine, [plan.unit("dev")])
    rec = pipeline.run(plan, docker_engine, plan.steps, failed_report=False)
    return plan, rec


def package_hashes(client, image: str) -> dict[str, str]:
    out = client.containers.run(image, ["python", "-c", HASH_PACKAGE], entrypoint=[], remove=True, network_disabled=True)
    return json.loads(out)


def test_the_plan_takes_the_overlay_route_for_it(dev_build):
    plan, _ = dev_build
    assert [(c.route, c.reasons) for c in plan.options.src] == [("overlay", tuple(sorted((ADDED, DELETED, EDITED))))]


def test_the_dev_layer_differs_from_the_clean_image_in_exactly_the_edited_files(docker_engine, dev_build):
    plan, _ = dev_build
    clean, dev = package_hashes(docker_engine, plan.clean.image), package_hashes(docker_engine, plan.unit("dev").image)
    differ = sorted(p for p in set(clean) | set(dev) if clean.get(p) != dev.get(p))
    assert differ == sorted([ADDED, DELETED, EDITED])


def test_the_dev_layer_holds_the_checkouts_bytes(docker_engine, dev_build, checkout):
    plan, _ = dev_build
    dev = package_hashes(docker_engine, plan.unit("dev").image)
    assert {p: dev[p] for p in (EDITED, ADDED)} == {
        p: hashlib.sha256((checkout / p).read_bytes()).hexdigest() for p in (EDITED, ADDED)}


def test_the_deleted_file_is_gone(docker_engine, dev_build):
    plan, _ = dev_build
    assert DELETED not in package_hashes(docker_engine, plan.unit("dev").image)


def test_the_dev_layer_is_one_layer_over_the_clean_image(docker_engine, dev_build):
    plan, _ = dev_build
    clean, dev = engine.layers(docker_engine, plan.clean.image), engine.layers(docker_engine, plan.unit("dev").image)
    assert (dev[:-1], len(dev)) == (clean, len(clean) + 1)


def test_the_patches_ran_on_the_edited_file(dev_build):
    _, rec = dev_build
    outcomes = {p["name"]: p["outcome"] for p in rec.patches["patches"]}
    assert outcomes["tuned-gemm-hipblaslt"] == "applied"


def test_the_image_gets_the_dev_tag_and_no_release_tag(docker_engine, dev_build):
    plan, rec = dev_build
    repo_tags = engine.inspect(docker_engine, rec.candidate_id)["RepoTags"]
    released = [t for t in repo_tags if t.startswith(plan.release_repo + ":") and not t.split(":")[-1].startswith("dev-")]
    assert (rec.release_ref, rec.dev_ref, released) == (
        None, f"{plan.release_repo}:{srcplan.dev_tag(USER, plan.options.src)}", [])


def test_the_image_is_labelled_dirty_with_the_head(docker_engine, dev_build, checkout):
    _, rec = dev_build
    labels = engine.inspect(docker_engine, rec.candidate_id)["Config"]["Labels"]
    head = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(checkout), "rev-parse", "HEAD"],  # noqa: S603,S607
                          capture_output=True, text=True, check=True).stdout.strip()
    assert (labels[srcplan.DIRTY_LABEL], labels["io.atom-build.src.aiter.head"]) == ("true", head)


def test_invoke_tag_refuses_the_dirty_image_with_one_line_and_exit_2(capsys, dev_build):
    _, rec = dev_build
    with pytest.raises(SystemExit) as info:
        Program(namespace=tasks.ns, version="test").run(["invoke", "tag", "--image", rec.dev_ref])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert (info.value.code, len(err), "dirty" in err[0]) == (2, 1, True)


def test_the_report_lists_the_changed_files(dev_build):
    plan, rec = dev_build
    from cleanbuild.images import report

    text = (report.folder_for(plan, rec, failed=False) / "report.md").read_text()
    listed = sorted(line.strip() for line in text.splitlines() if line.startswith("  - "))
    assert listed == [f"- added: {ADDED}", f"- deleted: {DELETED}", f"- modified: {EDITED}"]
