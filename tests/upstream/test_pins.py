"""cleanbuild.upstream.pins: `invoke pins` against the real repositories (PyPI answers recorded), and `--bump`."""

from __future__ import annotations

import datetime as dt
import difflib
import json

import pytest
from invoke import Program

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.core.run import run
from cleanbuild.core.spec import REPO_ROOT, patches_argv
from cleanbuild.upstream import pins, profiles
from cleanbuild.upstream.gitrepo import Repo
from tests.support.upstream import (
    AITER_HEAD,
    AITER_PIN,
    AITER_PR_HEAD,
    ATOM_HEAD,
    ATOM_PIN,
    MORI_COMMIT,
    commit_file,
    git,
    writable_copy,
)

# Recorded answers, shaped like https://pypi.org/pypi/<name>/json (only the fields pins.py reads, plus a few).
PYPI = {
    "https://pypi.org/pypi/triton/json": {"info": {"name": "triton", "version": "3.6.0"}, "releases": {"3.6.0": [
        {"filename": "triton-3.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
         "packagetype": "bdist_wheel", "requires_python": ">=3.10,<3.15"},
        {"filename": "triton-3.6.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
         "packagetype": "bdist_wheel", "requires_python": ">=3.10,<3.15"}]}},
    "https://pypi.org/pypi/uv/json": {"info": {"name": "uv", "version": "0.13.9"}, "releases": {"0.13.9": [
        {"filename": "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "packagetype": "bdist_wheel"},
        {"filename": "uv-0.13.9.tar.gz", "packagetype": "sdist"}]}},
    "https://pypi.org/pypi/amd-mori-nightly/json": {"info": {"name": "amd-mori-nightly"}, "releases": {
        "1.2.5.dev20261026": [{"filename": "amd_mori_nightly-1.2.5.dev20261026-cp312-cp312-manylinux_2_39_x86_64.whl",
                               "packagetype": "bdist_wheel"}]}},
}
# A recorded PyTorch index page (https://download.pytorch.org/whl/rocm7.2/torch/), one entry.
INDEX = {"https://download.pytorch.org/whl/rocm7.2/torch/": (
    '<!DOCTYPE html><html><body><h1>Links for torch</h1>\n'
    '<a href="/whl/rocm7.2/torch-2.11.0%2Brocm7.2-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=00">'
    'torch-2.11.0+rocm7.2-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>\n</body></html>'),
    # PyTorch's CPU index (https://download.pytorch.org/whl/cpu/torch/), the offline profile's torch, one entry.
    "https://download.pytorch.org/whl/cpu/torch/": (
    '<!DOCTYPE html><html><body><h1>Links for torch</h1>\n'
    '<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=00">'
    'torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>\n</body></html>')}


def recorded(answers: dict):
    def answer(url: str):
        if url not in answers:
            raise AssertionError(f"unexpected network request: {url}")
        return answers[url]

    return answer


@pytest.fixture
def pypi(monkeypatch):
    monkeypatch.setattr(pins, "_json", recorded(PYPI))
    monkeypatch.setattr(pins, "_text", recorded(INDEX))


def offline(upstream_sets, path=None, **overrides):
    return profiles.load("offline", {**upstream_sets, **overrides}, path)


def statuses(report) -> dict[str, str]:
    return {row.component: row.status for row in report.rows}


def row(report, component):
    return next(r for r in report.rows if r.component == component)


def behind(upstream, repo: str, ref: str, head: str) -> tuple[int, int]:
    """(commits, days) from ref to head, straight from git."""
    path = upstream / f"{repo}.git"
    count = int(git(path, "rev-list", "--count", f"{ref}..{head}"))
    date = {r: dt.datetime.fromisoformat(git(path, "log", "-1", "--format=%cI", r).decode().strip()) for r in (ref, head)}
    return count, (date[head] - date[ref]).days


# ---- check: the offline profile (the pins of the default profile, repositories in shared/upstream) -------------

@pytest.fixture(scope="module")
def offline_report(upstream):
    """pins.check of the offline profile, with the production reader (git show per file) and recorded PyPI."""
    sets = {"components.aiter.repo": str(upstream / "aiter.git"), "components.atom.repo": str(upstream / "atom.git")}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(pins, "_json", recorded(PYPI))
        m.setattr(pins, "_text", recorded(INDEX))
        return pins.check(profiles.load("offline", sets))


def test_offline_pins_are_all_good(offline_report):
    assert statuses(offline_report) == {"torch": "ok", "triton": "ok", "aiter": "ok", "atom": "ok",
                                        "installer": "ok", "aiter/atom": "ok", "flydsl": "ok"}
    assert offline_report.exit_code == 0


def test_the_offline_cpu_torch_is_checked_on_pytorchs_cpu_index(offline_report):
    torch = row(offline_report, "torch")
    assert (torch.pin, torch.detail) == ("torch==2.13.0+cpu @ https://download.pytorch.org/whl/cpu",
                                         "listed for cp311 on https://download.pytorch.org/whl/cpu")


@pytest.mark.parametrize("repo,ref,head", [("aiter", AITER_PIN, AITER_HEAD), ("atom", ATOM_PIN, ATOM_HEAD)])
def test_check_says_how_far_behind_main_a_pin_is(offline_report, upstream, repo, ref, head):
    commits, days = behind(upstream, repo, ref, head)
    found = row(offline_report, repo)
    assert (found.facts["behind"], found.facts["days_behind"], found.facts["head"]) == (commits, days, head)
    assert f"{commits} commits / {days} days behind {head[:8]}" in found.detail and found.detail.startswith("on main")


def test_check_resolves_atoms_aiter_imports(offline_report):
    pair = row(offline_report, "aiter/atom")
    assert pair.facts["missing"] == [] and f"all {pair.facts['imports_checked']} aiter imports" in pair.detail


def test_check_compares_flydsl_with_aiters_pin(offline_report):
    assert row(offline_report, "flydsl").detail == "aiter 79366eb8 pins flydsl==0.2.4; offline.lock has 0.2.4."


def test_default_profile_pins_are_good_against_the_same_commits(upstream_sets, pypi, monkeypatch):
    """torch from PyTorch's index, mori from PyPI, aiter/ATOM at the same commits as GitHub's (the import pair rule
    is the offline report's, above: same commits; here it only has to be consulted)."""
    asked = []
    monkeypatch.setattr(pins, "pair", lambda *a: asked.append(a[1::2]) or pins.Row("aiter/atom", "", "ok", ""))
    report = pins.check(profiles.load("default", upstream_sets))
    assert asked == [(AITER_PIN, ATOM_PIN)]
    assert statuses(report) == {"torch": "ok", "mori": "ok", "aiter": "ok", "atom": "ok", "installer": "ok",
                                "aiter/atom": "ok", "flydsl": "ok"}


def test_the_old_pins_are_wrong_and_named(upstream_sets, pypi):
    report = pins.check(offline(upstream_sets, **{"components.aiter.ref": AITER_PR_HEAD,
                                                   "components.atom.ref": MORI_COMMIT}))
    assert (report.exit_code, [r.component for r in report.problems]) == (1, ["aiter", "atom"])
    assert "024344700df3 is only on refs/pull/4465/head" in row(report, "aiter").detail
    assert f"f9b010e4f4f0 is not a commit of {upstream_sets['components.atom.repo']}" in row(report, "atom").detail


def test_the_old_atom_pin_alone_fails_naming_atom(upstream_sets, pypi):
    report = pins.check(offline(upstream_sets, **{"components.atom.ref": MORI_COMMIT}))
    assert [(r.component, r.pin) for r in report.problems] == [("atom", MORI_COMMIT)]


def test_a_short_ref_is_wrong(upstream_sets, pypi):
    report = pins.check(offline(upstream_sets, **{"components.aiter.ref": AITER_PIN[:12]}))
    assert "is not a full commit SHA" in row(report, "aiter").detail and report.exit_code == 1


def test_a_missing_branch_is_wrong(upstream_sets, pypi):
    report = pins.check(offline(upstream_sets, **{"components.atom.branch": "release"}))
    assert row(report, "atom").status == "WRONG" and "has no branch 'release'" in row(report, "atom").detail


def test_a_repository_path_that_does_not_exist_is_a_usage_error(upstream_sets, tmp_path, pypi):
    with pytest.raises(UsageError) as info:
        pins.check(offline(upstream_sets, **{"components.aiter.repo": str(tmp_path / "nowhere.git")}))
    assert str(info.value).startswith(f"repository {tmp_path / 'nowhere.git'} (") and "is not a git repository" in str(info.value)


def test_an_unreachable_repository_is_an_environment_problem(upstream_sets, pypi):
    with pytest.raises(EnvironmentProblem) as info:
        pins.check(offline(upstream_sets, **{"components.aiter.repo": "https://127.0.0.1:9/x.git"}))
    assert (info.value.exit_code, "cannot reach the repository https://127.0.0.1:9/x.git" in str(info.value)) == (3, True)


# ---- check: PyPI and the PyTorch index (recorded answers) ------------------------------------------------------

def test_pypi_pin_with_a_wheel_for_the_python(pypi):
    assert pins.pypi_pin("triton", "triton", "3.6.0", "3.11").status == "ok"


def test_pypi_pin_of_a_version_pypi_lacks(pypi):
    found = pins.pypi_pin("triton", "triton", "9.9.9", "3.11")
    assert (found.status, found.detail) == ("WRONG", "PyPI has no triton 9.9.9. To fix, pin a released version.")


def test_pypi_pin_without_a_wheel_for_the_python(pypi):
    found = pins.pypi_pin("triton", "triton", "3.6.0", "3.13")
    assert found.status == "WRONG" and "has no wheel for Python 3.13" in found.detail


def test_pypi_that_does_not_answer_leaves_the_pin_unchecked(monkeypatch):
    monkeypatch.setattr(pins, "_json", lambda url: None)
    assert pins.pypi_pin("triton", "triton", "3.6.0", "3.11").status == "unchecked"


def test_pypi_pin_accepts_an_abi3_wheel(monkeypatch):
    answer = {"releases": {"44.0.0": [{"filename": "cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl"}]}}
    monkeypatch.setattr(pins, "_json", lambda url: answer)
    assert pins.pypi_pin("x", "cryptography", "44.0.0", "3.12").status == "ok"


def test_pypi_pin_refuses_a_musllinux_only_release(monkeypatch):
    answer = {"releases": {"1.0": [{"filename": "foo-1.0-cp312-cp312-musllinux_1_2_x86_64.whl"}]}}
    monkeypatch.setattr(pins, "_json", lambda url: answer)
    assert pins.pypi_pin("x", "foo", "1.0", "3.12").status == "WRONG"


def test_index_pin_listed(pypi):
    found = pins.index_pin("torch", "https://download.pytorch.org/whl/rocm7.2", "2.11.0+rocm7.2", "3.12")
    assert (found.status, found.detail) == ("ok", "listed for cp312 on https://download.pytorch.org/whl/rocm7.2")


def test_index_pin_not_listed(pypi):
    found = pins.index_pin("torch", "https://download.pytorch.org/whl/rocm7.2", "2.12.0+rocm7.2", "3.12")
    assert found.status == "WRONG" and "NOT listed for cp312" in found.detail


def test_index_that_does_not_answer_leaves_the_pin_unchecked(monkeypatch):
    monkeypatch.setattr(pins, "_text", lambda url: None)
    assert pins.index_pin("torch", "https://x.invalid/whl", "2.11.0", "3.12").status == "unchecked"


def test_a_lock_with_another_flydsl_than_aiters_is_wrong(profile_dir, upstream_sets, upstream):
    lock_file = profile_dir / "offline.lock"
    lock_file.write_text(lock_file.read_text().replace("\nflydsl==0.2.4 ", "\nflydsl==0.3.0 "))
    found = pins.flydsl(offline(upstream_sets, profile_dir / "offline.toml"), Repo(str(upstream / "aiter.git")))
    assert found.status == "WRONG" and "aiter 79366eb8 pins flydsl==0.2.4; offline.lock has 0.3.0" in found.detail


# ---- `invoke pins`, in-process --------------------------------------------------------------------------------

def test_pins_task_exits_1_and_names_the_wrong_pin(upstream_sets, pypi, capsys, monkeypatch):
    import tasks

    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)
    sets = {**upstream_sets, "components.atom.ref": MORI_COMMIT}
    argv = ["invoke", "pins", "--profile", "offline", *[x for k, v in sets.items() for x in ("--set", f"{k}={v}")]]
    with pytest.raises(SystemExit) as info:
        Program(namespace=tasks.ns, version="test").run(argv)
    assert info.value.code == 1 and f"pin wrong: atom {MORI_COMMIT}" in capsys.readouterr().err


# ---- bump -----------------------------------------------------------------------------------------------------

def snapshot(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def changed_lines(before: bytes, after: bytes) -> tuple[list[str], list[str]]:
    diff = list(difflib.ndiff(before.decode().splitlines(), after.decode().splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_bump_dry_run_shows_the_diff_and_writes_nothing(profile_dir, upstream_sets):
    before = snapshot(profile_dir)
    result = pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=True)
    assert (result.written, result.drift, snapshot(profile_dir)) == (False, [], before)
    assert f'-ref = "{AITER_PIN}"' in result.diff.splitlines() and f'+ref = "{AITER_HEAD}"' in result.diff.splitlines()


def test_bump_rewrites_only_the_ref_line_and_its_note(profile_dir, upstream_sets):
    before = snapshot(profile_dir)
    result = pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=False,
                       relock=None)
    after = snapshot(profile_dir)
    removed, added = changed_lines(before["default.toml"], after["default.toml"])
    assert result.written is True
    assert removed == [f'ref = "{AITER_PIN}"']
    assert len(added) == 2 and added[0].startswith(f"# pins --bump {dt.date.today().isoformat()}: e4048607a535 ")
    assert added[1] == f'ref = "{AITER_HEAD}"'
    assert {k: v for k, v in after.items() if k != "default.toml"} == {k: v for k, v in before.items() if k != "default.toml"}


def test_bumped_profile_loads_with_the_new_pin(profile_dir, upstream_sets):
    pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=False, relock=None)
    assert profiles.load("offline", path=profile_dir / "offline.toml").component("aiter").ref == AITER_HEAD


def test_bump_runs_every_patch_on_the_candidate(profile_dir, upstream_sets):
    result = pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=True)
    assert result.outcomes["tuned-gemm-hipblaslt"] == "applied"
    assert result.outcomes["jit-core-runtime-error"] == "upstream-fixed"
    assert set(result.outcomes.values()) <= {"applied", "upstream-fixed"}


GENERIC_ELSE = """            if (
                gfx == "gfx1250"
                and not scaleAB
                and eval(dtype) in (dtypes.bf16, dtypes.fp16)
            ):
                default_config["libtype"] = "triton"
                default_config["solidx"] = 0
            else:
                default_config["libtype"] = "torch"
                default_config["solidx"] = 0
"""
# The same choice as one conditional expression: the patch cannot tell which arm is the generic path, so it drifts.
CONDITIONAL = """            default_config["libtype"] = (
                "triton"
                if gfx == "gfx1250" and not scaleAB and eval(dtype) in (dtypes.bf16, dtypes.fp16)
                else "torch"
            )
            default_config["solidx"] = 0
"""


@pytest.fixture
def drifting_aiter(tmp_path) -> tuple[str, str]:
    """(repository, commit): aiter main HEAD plus one commit whose tuned_gemm.py the patch cannot read."""
    bare = writable_copy("aiter.git", tmp_path / "aiter.git")
    source = git(bare, "show", f"{AITER_HEAD}:aiter/tuned_gemm.py").decode()
    assert source.count(GENERIC_ELSE) == 1
    sha = commit_file(bare, AITER_HEAD, "aiter/tuned_gemm.py", source.replace(GENERIC_ELSE, CONDITIONAL).encode(),
                      "tuned_gemm: one conditional expression")
    return str(bare), sha


def test_bump_to_a_drifting_candidate_writes_nothing(profile_dir, upstream_sets, drifting_aiter):
    repo, sha = drifting_aiter
    before = snapshot(profile_dir)
    prof = offline(upstream_sets, profile_dir / "offline.toml", **{"components.aiter.repo": repo})
    result = pins.bump(prof, "aiter", None, dry_run=False, relock=None)
    assert (result.new, result.written, snapshot(profile_dir)) == (sha, False, before)
    assert result.outcomes["tuned-gemm-hipblaslt"] == "drifted"
    assert len(result.drift) == 1 and result.drift[0].startswith("tuned-gemm-hipblaslt: aiter/tuned_gemm.py:")


def test_bump_of_a_non_git_component_is_refused(upstream_sets):
    with pytest.raises(UsageError, match="components.torch is not a git pin. To fix, bump one of: aiter, atom"):
        pins.bump(offline(upstream_sets), "torch", None, dry_run=True)


def test_bump_to_an_unknown_commit_is_refused(upstream_sets):
    with pytest.raises(UsageError, match=f"{MORI_COMMIT} is not a commit of"):
        pins.bump(offline(upstream_sets), "atom", MORI_COMMIT, dry_run=True)


def test_bump_finds_the_ref_past_a_bracket_in_a_comment(profile_dir, upstream_sets):
    default = profile_dir / "default.toml"
    default.write_text(default.read_text().replace("[components.aiter]\n", "[components.aiter]\n# see [1] below\n"))
    result = pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=True)
    assert result.diff.startswith(f"--- {default}\n")


def test_bump_of_a_profile_elsewhere_writes_that_file_not_the_built_in(tmp_path, upstream_sets):
    """A profile outside cleanbuild/profiles inheriting "default" loads (profiles falls back to the built-in);
    its bump writes the new ref into that file and never edits the repository's own profiles (issue 20).
    (This test used to pin the old behaviour: a diff of the built-in default.toml.)"""
    mine = tmp_path / "mine.toml"
    mine.write_text('inherits = "default"\nname = "mine"\n')
    builtin = {p.name: p.read_bytes() for p in profiles.PROFILE_DIR.iterdir()}
    result = pins.bump(profiles.load("mine", upstream_sets, mine), "aiter", AITER_HEAD, dry_run=False, relock=None)
    assert result.diff.startswith(f"--- {mine}\n")
    assert profiles.load("mine", path=mine).component("aiter").ref == AITER_HEAD
    assert {p.name: p.read_bytes() for p in profiles.PROFILE_DIR.iterdir()} == builtin


def test_bump_to_a_pull_request_commit_is_refused_as_pins_refuses_it(upstream_sets):
    with pytest.raises(UsageError) as info:
        pins.bump(offline(upstream_sets), "aiter", AITER_PR_HEAD, dry_run=True)
    assert str(info.value) == (f"pins --bump aiter refused: {AITER_PR_HEAD[:12]} is only on refs/pull/4465/head. To fix, "
                               "pin the commit that landed on main (`invoke pins --bump aiter --to SHA`).")


@pytest.mark.parametrize("to", ["--upload-pack=touch pwned", "main..x", "-", "a b"])
def test_bump_to_refuses_what_is_not_a_ref(upstream_sets, to):
    with pytest.raises(UsageError, match="--to .* is not a commit SHA or a git ref name"):
        pins.bump(offline(upstream_sets), "aiter", to, dry_run=True)


def test_affected_profiles_are_the_definer_and_its_heirs(profile_dir):
    """default.toml defines aiter's ref: default and offline (which inherits it) are affected, whichever is given."""
    want = [profile_dir / "default.toml", profile_dir / "offline.toml"]
    assert pins.affected(profile_dir / "default.toml", profile_dir / "offline.toml", "aiter") == want
    assert pins.affected(profile_dir / "default.toml", profile_dir / "default.toml", "aiter") == want


def test_an_heir_that_sets_its_own_ref_is_not_affected(profile_dir):
    offline_toml = profile_dir / "offline.toml"
    offline_toml.write_text(offline_toml.read_text().replace("[components.aiter]\n", f'[components.aiter]\nref = "{AITER_PIN}"\n'))
    assert pins.affected(profile_dir / "default.toml", offline_toml, "aiter") == [profile_dir / "default.toml"]


def test_bump_remakes_every_affected_lock_with_the_profile_in_one_change(profile_dir, upstream_sets, monkeypatch):
    """pins --bump --profile offline: the profile file and the locks of default AND offline, written together."""
    rendered, written = [], []

    def render(prof, **_):
        rendered.append((prof.file.name, prof.component("aiter").ref))
        runtime, build = pins.lock.lock_paths(prof)
        return {runtime: f"runtime of {prof.name}\n", build: f"build of {prof.name}\n"}

    monkeypatch.setattr(pins.lock, "render", render)
    monkeypatch.setattr(pins, "replace_all", lambda files: written.append(sorted(p.name for p in files)))
    pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=False,
              relock=upstream_sets)
    assert rendered == [("default.toml", AITER_HEAD), ("offline.toml", AITER_HEAD)]
    assert written == [["default.build.lock", "default.lock", "default.toml", "offline.build.lock", "offline.lock"]]


def test_a_lock_that_cannot_be_made_leaves_profile_and_locks_as_they_were(profile_dir, upstream_sets, monkeypatch):
    before = snapshot(profile_dir)
    calls = []

    def render(prof, **_):
        calls.append(prof.name)
        if len(calls) == 2:
            raise pins.StepFailed("uv could not resolve the closure: test")
        runtime, build = pins.lock.lock_paths(prof)
        return {runtime: "new\n", build: "new\n"}

    monkeypatch.setattr(pins.lock, "render", render)
    with pytest.raises(pins.StepFailed):
        pins.bump(offline(upstream_sets, profile_dir / "offline.toml"), "aiter", AITER_HEAD, dry_run=False,
                  relock=upstream_sets)
    assert snapshot(profile_dir) == before


def test_rewrite_ref_keeps_one_bump_note():
    text = '[components.aiter]\nrepo = "r"\nref = "old"\n[components.atom]\nref = "keep"\n'
    once = pins.rewrite_ref(text, "aiter", "old", "mid", "pins --bump first")
    twice = pins.rewrite_ref(once, "aiter", "mid", "new", "pins --bump second")
    assert twice == '[components.aiter]\nrepo = "r"\n# pins --bump second\nref = "new"\n[components.atom]\nref = "keep"\n'


def test_rewrite_ref_refuses_a_ref_written_another_way():
    with pytest.raises(UsageError, match="components.aiter.ref is not written as ref = \"old\""):
        pins.rewrite_ref("[components.aiter]\nref='old'\n", "aiter", "old", "new", "note")


def test_patches_argv_starts_this_checkouts_patches_cli(tmp_path):
    """The one way the host starts `python -m patches` (pins' check, `invoke patch --src`) reaches the real CLI."""
    (tmp_path / "aiter").mkdir()
    result = run(patches_argv("check", tmp_path, "--json"), cwd=REPO_ROOT, capture=True, check=False, echo=False)
    report = json.loads(result.stdout)
    assert (result.returncode, report["root"], report["mode"]) == (0, str(tmp_path), "check")
