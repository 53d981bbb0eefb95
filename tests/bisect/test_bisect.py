"""`invoke bisect`: git bisect over source trees names the commit that broke a check, in few check runs.

On hand-made repositories whose commits the tests write (an aiter-like dispatcher one commit reroutes to torch, a
jit/core.py one commit turns back to SystemExit), and on the real aiter and ATOM histories in shared/upstream,
cloned (objects shared, never written) into a temporary folder.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from pathlib import Path

import pytest

from cleanbuild.bisect import checks as checking
from cleanbuild.cli.settings import resolve
from cleanbuild.commands.bisect_commits import bisect_command
from cleanbuild.core.errors import UsageError
from tests.support.fake_aiter import JIT_EXITS, JIT_FIXED, history, tuned_gemm
from tests.support.gitrepos import git

# Real ATOM main: 9efc2c12 "Eplb v2 mega (#1691)" imports aiter.ops.flydsl.kernels.mega_moe, which aiter at the
# profiles' pin (79366eb8) lacks; c2d40e2d is 8 first-parent commits before e9f70aaf.
ATOM_GOOD, ATOM_BAD = "c2d40e2dd2c6b35e96fe33a60ef3e74a0a3da29c", "e9f70aafaf9e038a922ee6908e0142454831e26d"
ATOM_BREAK = "9efc2c122faf53d62ede42f9c2f4e381895cd9e7"
# Real aiter main, 044f906a (2026-07-28) .. d4fe3178 (2026-07-31): every patch's outcome is the same throughout.
AITER_GOOD, AITER_BAD = "044f906a8d", "d4fe317848"


def request(repo: Path | None = None, *, arch: str | None = None, **sets: str):
    pairs = [f"components.aiter.repo={repo}"] if repo else []
    pairs += [f"{k}={v}" for k, v in sets.items()]
    return resolve({"profile": "offline", "set": pairs, "arch": arch, "device": "cpu"}, None)


def run_json(capsys, *args, **kwargs) -> tuple[int, dict]:
    code = bisect_command(*args, as_json=True, **kwargs)
    return code, json.loads(capsys.readouterr().out)


# --- hand-made histories ------------------------------------------------------------------------------------


def test_names_the_commit_that_reroutes_the_dispatcher_to_torch(tmp_path, capsys):
    commits = [{"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_honest")}, {}, {},
               {"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_reroutes_to_torch")}, {}, {}]
    repo, shas = history(tmp_path, commits)
    code, data = run_json(capsys, request(repo, arch="gfx942"), "aiter", shas[0], shas[-1], ("gemm-hipblaslt",))
    assert (code, data["first_bad"]["sha"]) == (0, shas[3])
    assert data["first_bad"]["pull_request"] == 1003
    assert data["at_first_bad"][0].startswith("gemm-hipblaslt: failed: untuned bfloat16 M=4099 N=4097 K=4096: "
                                              "reached torch")
    assert data["at_parent"][0].startswith("gemm-hipblaslt: passed")
    assert data["check_runs"] <= math.ceil(math.log2(len(shas) - 1)) + 2


def test_skipped_commits_that_leave_it_open_are_listed_and_exit_1(tmp_path, capsys):
    """Commits 1 and 2 drift the patch that validation needs (untestable: git bisect skips them), commit 3
    reroutes: the first bad commit is one of 1, 2 or 3, and bisect says so instead of guessing."""
    commits = [{"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_honest")}, {"aiter/tuned_gemm.py": "def broken(:\n"}, {},
               {"aiter/tuned_gemm.py": tuned_gemm("tuned_gemm_reroutes_to_torch")}]
    repo, shas = history(tmp_path, commits)
    code, data = run_json(capsys, request(repo, arch="gfx942"), "aiter", shas[0], shas[-1], ("gemm-hipblaslt",))
    assert (code, data["first_bad"]) == (1, None)
    assert data["summary"].startswith("skipped commits leave it open: the first bad commit is one of ")
    assert {sha[:12] for sha in shas[1:]} == set(data["summary"].rsplit("one of ", 1)[1].split(", "))
    assert {s["verdict"] for s in data["steps"]} == {"good", "bad", "untestable"}


def test_names_the_commit_whose_patch_outcome_changes(tmp_path, capsys):
    commits = [{"aiter/jit/core.py": JIT_FIXED}, {}, {}, {}, {"aiter/jit/core.py": JIT_EXITS}, {}, {}, {}, {}]
    repo, shas = history(tmp_path, commits)
    code, data = run_json(capsys, request(repo), "aiter", shas[0], shas[-1], ("patch:jit-core-runtime-error",))
    assert (code, data["first_bad"]["sha"]) == (0, shas[4])
    assert data["at_first_bad"][0].startswith("patch:jit-core-runtime-error: applied, not upstream-fixed as at --good")
    assert data["at_parent"][0].startswith("patch:jit-core-runtime-error: upstream-fixed")
    assert data["check_runs"] <= math.ceil(math.log2(len(shas) - 1)) + 2


def test_every_commit_good_is_exit_1_and_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    repo, shas = history(tmp_path, [{"aiter/jit/core.py": JIT_FIXED}, {}, {}])
    before = git(repo, "for-each-ref")
    code, data = run_json(capsys, request(repo), "aiter", shas[0], shas[-1], ("patch:jit-core-runtime-error",))
    assert (code, data["first_bad"], data["check_runs"]) == (1, None, 2)
    assert git(repo, "for-each-ref") == before  # no refs/bisect/*, no new branch
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_empty_range_is_exit_1_without_a_check_run(tmp_path, capsys):
    repo, shas = history(tmp_path, [{"aiter/jit/core.py": JIT_FIXED}])
    code, data = run_json(capsys, request(repo), "aiter", shas[0], shas[0], ("patch:jit-core-runtime-error",))
    assert (code, data["commits"], data["check_runs"]) == (1, 0, 0)


def test_report_folder_gets_json_and_markdown(tmp_path, capsys):
    repo, shas = history(tmp_path, [{"aiter/jit/core.py": JIT_FIXED}, {"aiter/jit/core.py": JIT_EXITS}])
    out = tmp_path / "report"
    code = bisect_command(request(repo), "aiter", shas[0], shas[1], ("patch:jit-core-runtime-error",), report_dir=out)
    assert code == 0
    assert json.loads((out / "bisect.json").read_text())["first_bad"]["sha"] == shas[1]
    assert f"first bad commit: `{shas[1]}`" in (out / "bisect.md").read_text()
    assert f"first bad commit: {shas[1]}" in capsys.readouterr().out


# --- bad input: exit 2, before any check runs -----------------------------------------------------------------


@pytest.mark.parametrize(("component", "names", "says"), [
    ("mori", (), "not a component bisect knows"),
    ("aiter", ("patch:atom-ck-free-triton-gemm",), "aiter has no such patch"),
    ("aiter", ("gemm-ck",), "add --image"),
    ("aiter", ("gemm-nothing",), "no check has that name"),
    ("atom", ("gemm-hipblaslt",), "bisect aiter for it"),
])
def test_unknown_component_or_check(component, names, says):
    with pytest.raises(UsageError, match=says) as info:
        bisect_command(request(), component, "main", "main", names)
    assert info.value.exit_code == 2


def test_validation_checks_need_an_arch(tmp_path):
    repo, shas = history(tmp_path, [{}])
    with pytest.raises(UsageError, match="pass --arch gfx942 or gfx950"):
        bisect_command(request(repo), "aiter", shas[0], shas[0], ())


@pytest.mark.parametrize("component,names,says", [
    ("atom", (), "does not change with atom"),
    ("aiter", ("patch:tuned-gemm-hipblaslt",), "drop --image for it"),
    ("aiter", ("import",), "drop --image for it"),
])
def test_image_mode_refuses_checks_it_cannot_run(component, names, says):
    with pytest.raises(UsageError, match=says):
        bisect_command(request(arch="gfx950"), component, "main", "main", names, image=True)


def test_image_mode_checks_default_to_every_validation_check_and_allow_the_image_ones():
    every = checking.parse("aiter", (), image=True)
    assert {c.kind for c in every} == {checking.VALIDATION}
    assert {c.name for c in every} == {*checking.SOURCE_CHECKS, *checking.IMAGE_CHECKS}
    assert checking.parse("aiter", ("gemm-ck",), image=True) == (checking.Check(checking.VALIDATION, "gemm-ck"),)
    with pytest.raises(UsageError, match="add --image"):
        checking.parse("aiter", ("gemm-ck",))


def test_image_mode_without_an_engine_is_exit_3_before_any_step(monkeypatch, tmp_path):
    from cleanbuild.core.errors import EnvironmentProblem

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(EnvironmentProblem, match="engine is not reachable"):
        bisect_command(request(arch="gfx950"), "aiter", "main", "main", (), image=True)


def test_image_mode_names_the_arch_it_builds_for():
    with pytest.raises(UsageError, match="pass --arch gfx942 or gfx950"):
        bisect_command(request(), "aiter", "main", "main", (), image=True)


@pytest.mark.network  # the commit's lock is remade with uv
def test_image_setup_travels_to_the_step_process_and_pins_the_commit(tmp_path):
    from cleanbuild.bisect import imagestep
    from cleanbuild.images.plan import make_plan
    from cleanbuild.upstream import lock

    asked = resolve({"profile": "offline", "arch": "gfx950", "ck_free": True, "device": "cpu"}, None)
    setup = imagestep.Setup(asked, asked.arch[0])
    loaded = imagestep.load(Path(imagestep.save(setup, tmp_path / "setup.pickle")))
    assert loaded == setup
    sha = "8a9186d983ed34ece2f68fe039e07f1b0abe147b"
    pinned = imagestep.at_commit(loaded.request, "aiter", sha, tmp_path / "step")
    assert pinned.profile.component("aiter").ref == sha
    assert pinned.profile.name == asked.profile.name and pinned.ck_free
    assert pinned.profile.read_from("aiter") == asked.profile.read_from("aiter")  # the mirror's copy kept
    assert lock.check(pinned.profile) == []  # its own lock, remade for the commit
    assert lock.lock_paths(pinned.profile)[0].parent == tmp_path / "step"  # never the repository's lock files
    made = [p.stat().st_mtime_ns for p in lock.lock_paths(pinned.profile)]
    plan = imagestep.plan_for(loaded, "aiter", sha, checking.parse("aiter", ("gemm-hipblaslt", "gemm-ck"), image=True),
                              tmp_path / "step")
    assert [p.stat().st_mtime_ns for p in lock.lock_paths(pinned.profile)] == made  # the same commit: not remade
    assert plan.validate.command[-3:] == ("--only", "gemm-hipblaslt", "gemm-ck")
    assert "ckfree" in plan.patch.image and plan.prepare.lock_problem is None
    at_pin = imagestep.plan_for(loaded, "aiter", asked.profile.component("aiter").ref, (), tmp_path / "pin")
    assert at_pin.units == make_plan(asked.profile, asked.build(asked.arch[0])).units  # the pin: every key the same


def test_a_ref_not_in_the_repository(tmp_path):
    repo, shas = history(tmp_path, [{}])
    with pytest.raises(UsageError, match="--good nosuchbranch failed because it is not a commit"):
        bisect_command(request(repo), "aiter", "nosuchbranch", shas[0], ("patch:jit-core-runtime-error",))


def test_good_must_be_an_ancestor_of_bad(tmp_path):
    repo, shas = history(tmp_path, [{}, {}])
    with pytest.raises(UsageError, match="not an ancestor of --bad"):
        bisect_command(request(repo), "aiter", shas[1], shas[0], ("patch:jit-core-runtime-error",))


def test_good_that_already_fails_is_bad_input(tmp_path):
    repo, shas = history(tmp_path, [{"aiter/tuned_gemm.py": "def broken(:\n"}, {}])
    with pytest.raises(UsageError, match="--good .* is not good already: patch:tuned-gemm-hipblaslt: drifted"):
        bisect_command(request(repo), "aiter", shas[0], shas[1], ("patch:tuned-gemm-hipblaslt",))


def test_unwritable_report_folder_is_refused_before_starting(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        bisect_command(request(), "aiter", "main", "main", ("import",), report_dir=tmp_path / "file")


def test_patch_owners_match_the_catalog():
    from patches.catalog import PATCHES

    owners = {p.name: p.target.split("/")[0] for p in PATCHES}
    assert owners == checking.PATCHES


# --- the real histories ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clones(tmp_path_factory) -> dict[str, Path]:
    """Writable copies of the real repositories (writable_copy: a clone of these shallow ones repacks every object):
    the shared copies are only read."""
    from tests.support.upstream import writable_copy

    folder = tmp_path_factory.mktemp("upstream")
    return {name: writable_copy(f"{name}.git", folder / f"{name}.git") for name in ("aiter", "atom")}


def real(clones: dict[str, Path]):
    return resolve({"profile": "offline", "set": [f"components.{n}.repo={p}" for n, p in clones.items()]}, None)


def test_real_atom_commit_that_imports_what_the_aiter_pin_lacks(clones, capsys):
    code, data = run_json(capsys, real(clones), "atom", ATOM_GOOD, ATOM_BAD, ("import",))
    assert (code, data["first_bad"]["sha"], data["first_bad"]["pull_request"]) == (0, ATOM_BREAK, 1691)
    assert "aiter.ops.flydsl.kernels.mega_moe" in data["at_first_bad"][0]
    assert data["at_parent"][0].startswith("import: all ")
    assert data["check_runs"] <= math.ceil(math.log2(data["commits"])) + 2


def test_real_aiter_range_where_every_patch_holds(clones, capsys):
    names = tuple(f"patch:{p}" for p, owner in checking.PATCHES.items() if owner == "aiter")
    code, data = run_json(capsys, real(clones), "aiter", AITER_GOOD, AITER_BAD, names)
    assert (code, data["first_bad"], data["check_runs"]) == (1, None, 2)
    assert data["summary"].startswith("every check holds at --bad")


def test_ctrl_c_exits_130_and_leaves_no_bisect_state(tmp_path):
    """Ctrl-C reaches the whole foreground group (invoke, git bisect run, the step): exit 130, temp folder gone."""
    import os
    import signal
    import sys
    import time

    from tests.support.upstream import REPO_ROOT

    repo, shas = history(tmp_path, [{"aiter/jit/core.py": JIT_FIXED}, *[{} for _ in range(30)], {"aiter/jit/core.py": JIT_EXITS}])
    temp = tmp_path / "tmp"
    temp.mkdir()
    argv = [sys.executable, "-m", "invoke", "bisect", "aiter", "--good", shas[0], "--bad", shas[-1], "--profile",
            "offline", "--set", f"components.aiter.repo={repo}", "--check", "patch:jit-core-runtime-error"]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(REPO_ROOT)},  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(temp.glob("cleanbuild-bisect-*/bisect.git/BISECT_START")) and proc.poll() is None:
        assert time.monotonic() < deadline, "git bisect never started"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    assert list(temp.iterdir()) == []


def test_an_import_step_reads_the_commit_in_memory_and_a_commit_without_the_package_is_untestable(tmp_path):
    from cleanbuild.bisect import probe, step
    from cleanbuild.bisect.checks import IMPORT, Check

    repo, shas = history(tmp_path, [{}])  # aiter/ only: bisecting atom, this commit has no atom/
    nowhere = tmp_path / "absent"  # the step's work folder: a tree written to disk would fail to make its folder
    plan = step.Plan(str(repo / ".git"), "", "atom", (Check(IMPORT, IMPORT),),
                     probe.Setup("atom", None, None, str(tmp_path / "fake-aiter"), {}), str(tmp_path / "record"),
                     str(nowhere))
    found = step.test(plan, shas[0])
    assert (found.verdict, [f.line for f in found.findings]) == ("untestable", ["import: untestable: no atom/ there"])
    assert not nowhere.exists()
