"""`bisect aiter --image`: each step a real build of the commit through the pipeline, validation inside its image.

The mirror is made for the test (tests/support/aiter_commits.py): shared/upstream's aiter.git with two commits on
the profiles' pin, the first of which points aiter's "hipblaslt" entry of solMap at torch_gemm: --bad is the second,
so the commit named is one the search itself built and checked (each commit is a build of aiter's units). The pin's
image is the session's offline gfx950 CK-free build (found by key), so the bisection builds the new commits (only
aiter's units move) and names the rerouting one.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest

from cleanbuild.bisect import checks as checking
from cleanbuild.bisect import imagestep
from cleanbuild.cli.settings import resolve
from cleanbuild.commands.bisect_commits import bisect_command
from tests.support.aiter_commits import mirror_with_commits
from tests.support.builds import forget, only_in
from tests.support.containers import left_by, record_run_ids
from tests.support.upstream import AITER_PIN

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.network]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("mirror")
    return folder, mirror_with_commits(folder, 2, break_at=0)


def image_request(folder: Path):
    return resolve({"profile": "offline", "arch": "gfx950", "ck_free": True, "device": "cpu", "progress": "plain",
                    "mirror": str(folder)}, None)


def test_names_the_commit_that_reroutes_the_dispatcher_in_the_built_image(docker_engine, offline_builds, mirror,
                                                                          capsys, tmp_path, monkeypatch):
    folder, shas = mirror
    run_ids = record_run_ids(monkeypatch)  # before the request: it makes the build's run id
    built = offline_builds["gfx950-ckfree"]
    request = image_request(folder)
    checks = checking.parse("aiter", ("gemm-hipblaslt",), image=True)
    setup = imagestep.Setup(request, request.arch[0])
    # the bisection's own temporary folder, not the machine's /tmp: another bisection on the machine (the unit tier
    # run beside this one) makes and removes its folders there meanwhile
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    failed_tags = set(_failed_tags(docker_engine))
    try:
        code = bisect_command(request, "aiter", AITER_PIN, shas[-1], ("gemm-hipblaslt",), as_json=True, image=True,
                              report_dir=tmp_path / "report")
        data = json.loads(capsys.readouterr().out)
        assert code == 0, data["summary"]
        assert data["first_bad"]["sha"] == shas[0]  # between --good and --bad: a step of its own
        assert data["first_bad"]["pull_request"] == 9001
        assert data["steps_build_images"] is True
        assert data["check_runs"] <= math.ceil(math.log2(len(shas))) + 2
        assert any("torch" in line for line in data["at_first_bad"]), data["at_first_bad"]
        assert all("passed" in line for line in data["at_parent"]), data["at_parent"]
        assert {s["sha"] for s in data["steps"]} <= {AITER_PIN, *shas}
        # the pin's image was the session's: found by key, the good step built nothing
        assert imagestep.plan_for(setup, "aiter", AITER_PIN, checks, tmp_path / "pin").patch.image == built.candidate
        assert (tmp_path / "report" / "bisect.md").is_file()
        # nothing left behind: no bisect folder, no container of a step, no -failed tag of a bad step
        assert list(temp.glob("cleanbuild-bisect-*")) == []
        assert run_ids and left_by(docker_engine, run_ids) == []
        assert set(_failed_tags(docker_engine)) == failed_tags
    finally:
        for sha in shas:
            plan = imagestep.plan_for(setup, "aiter", sha, checks, tmp_path / sha)
            forget(docker_engine, only_in(plan, built.plan))


def _failed_tags(client) -> list[str]:
    return [t for image in client.images.list() for t in image.tags if t.endswith("-failed")]
