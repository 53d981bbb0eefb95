"""cleanbuild.bisect.warm and validation.serve: one process that imported torch answers each bisect step's
`python -m validation` from a child of its own, with the answer a process of the step's own gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cleanbuild.bisect import probe, warm
from tests.support.fake_aiter import tuned_gemm


def source(tmp_path: Path, variant: str) -> Path:
    """An aiter-like source tree whose dispatcher is one of the validation fixtures."""
    root = tmp_path / variant
    (root / "aiter" / "configs").mkdir(parents=True)
    (root / "aiter" / "tuned_gemm.py").write_text(tuned_gemm(variant))
    return root


def argv(root: Path, *only: str) -> list[str]:
    return ["--arch", "gfx942", "--device", "cpu", "--aiter-src", str(root), "--json", str(root / "v.json"),
            "--only", *(only or ("gemm-hipblaslt",))]


def statuses(root: Path) -> list[tuple[str, str, str, list[tuple[str, str, str]]]]:
    """Each check's name, status and reason, and each case's status, backend and note (not its timings)."""
    data = json.loads((root / "v.json").read_text())
    return [(c["name"], c["status"], c["reason"], [(k["status"], k["backend"], k["note"]) for k in c["cases"]])
            for c in data["checks"]]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One warm process for the module's requests: each request is a child of its own, so sharing it is what a
    bisection does and changes no answer."""
    with warm.started(tmp_path_factory.mktemp("warm")) as path:
        assert path is not None
        yield path


def test_each_request_runs_in_a_child_that_imports_its_own_tree(tmp_path, served):
    """honest, rerouted, honest again: the third passes only if nothing the second imported was kept."""
    honest, rerouted = source(tmp_path, "tuned_gemm_honest"), source(tmp_path, "tuned_gemm_reroutes_to_torch")
    codes = [warm.ask(served, argv(root), root)[0] for root in (honest, rerouted, honest)]
    assert codes == [0, 1, 0]
    assert statuses(rerouted)[0][1] == "failed" and statuses(rerouted)[0][3][0][2].startswith("reached torch")


def test_the_steps_environment_reaches_the_child(tmp_path, served, monkeypatch):
    honest = source(tmp_path, "tuned_gemm_honest")
    before = warm.ask(served, argv(honest, "arch-consistency"), honest)[0]
    monkeypatch.setenv("GPU_ARCHS", "gfx942;gfx950")
    after, stderr = warm.ask(served, argv(honest, "arch-consistency"), honest)
    assert (before, after) == (0, 1), stderr


def test_once_the_process_is_gone_a_step_runs_validation_itself_and_gets_the_warm_answer(tmp_path, served):
    rerouted = source(tmp_path, "tuned_gemm_reroutes_to_torch")
    code, _ = warm.ask(served, argv(rerouted), rerouted)
    warm_said = statuses(rerouted)
    with warm.started(tmp_path) as gone:
        assert gone is not None
    with pytest.raises(OSError):
        warm.ask(gone, argv(rerouted), rerouted)
    cold = probe._validate(probe.Setup("aiter", "gfx942", "cpu", None, {}, warm=gone), argv(rerouted), rerouted)
    assert (code, warm_said) == (cold[0], statuses(rerouted)) and code == 1


def test_a_folder_too_deep_for_a_unix_socket_gets_no_warm_process(tmp_path):
    deep = tmp_path / ("d" * warm.SOCKET_PATH_MAX)
    deep.mkdir()
    with warm.started(deep) as path:
        assert path is None
