"""cleanbuild.upstream.mirror: ATOM_BUILD_MIRROR names local copies of the git repositories, read instead of the
network. Where commits are read, never what they are: the URLs, keys, labels and the lock stay the same."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cleanbuild.cli import settings
from cleanbuild.cli.program import AtomBuild
from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.core.spec import DOCKER_DIR
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import plan as P
from cleanbuild.images.record import BuildRecord, clean_labels
from cleanbuild.upstream import lock, mirror, profiles
from tests.support.requests import build_of
from tests.support.upstream import AITER_PIN, ATOM_PIN

AITER_URL, ATOM_URL = "https://github.com/ROCm/aiter.git", "https://github.com/ROCm/ATOM.git"
NOWHERE = "https://127.0.0.1:9/aiter.git"  # refused at once: unreachable without waiting for a timeout
FIX = "To fix, set ATOM_BUILD_MIRROR to a folder with aiter.git and atom.git (copies of the pinned repositories)."


@pytest.fixture(autouse=True)
def no_mirror_env(monkeypatch):
    """CI exports ATOM_BUILD_MIRROR; each test here sets exactly the mirror it means."""
    monkeypatch.delenv(mirror.ENV, raising=False)


def git_init(path: Path, *, bare: bool = True) -> Path:
    subprocess.run(["git", "init", "-q", *(["--bare"] if bare else []), str(path)], check=True)  # noqa: S603,S607
    return path


@pytest.fixture
def copies(tmp_path) -> Path:
    """A mirror folder with empty bare aiter.git and atom.git: enough for everything that reads no commit."""
    folder = tmp_path / "mirror"
    for name in ("aiter.git", "atom.git"):
        git_init(folder / name)
    return folder


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---- the naming rule and the setting ----------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "name"), [
    (ATOM_URL, "atom.git"), (AITER_URL, "aiter.git"), ("https://github.com/ROCm/aiter", "aiter.git"),
    ("https://github.com/ROCm/mori/", "mori.git"), ("git@github.com:ROCm/ATOM.git", "atom.git"),
    ("git@example.com:aiter.git", "aiter.git"),
])
def test_a_copy_is_the_urls_last_segment_lower_cased_with_git(url, name):
    assert mirror.copy_name(url) == name


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_is_no_mirror(value):
    assert mirror.folder(value) is None


def test_a_mirror_that_is_not_a_folder_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    for missing in (tmp_path / "nowhere", tmp_path / "file"):
        with pytest.raises(UsageError) as info:
            mirror.folder(str(missing))
        assert one_line(info).startswith(f"ATOM_BUILD_MIRROR {missing} is not a folder. {FIX[:-1]}, or unset it.")


def test_a_mirror_without_a_copy_is_named(tmp_path):
    folder = tmp_path / "mirror"
    git_init(folder / "aiter.git")
    with pytest.raises(UsageError) as info:
        mirror.attach(profiles.load("default"), folder)
    assert one_line(info).startswith(f"ATOM_BUILD_MIRROR {folder} has no atom.git, the copy of {ATOM_URL}. To fix, ")
    assert info.value.exit_code == 2


def test_a_copy_may_be_bare_or_a_clone(tmp_path):
    folder = tmp_path / "mirror"
    git_init(folder / "aiter.git")
    git_init(folder / "atom.git", bare=False)
    prof = mirror.attach(profiles.load("default"), folder)
    assert dict(prof.reads) == {"aiter": str(folder / "aiter.git"), "atom": str(folder / "atom.git")}


def test_the_profile_keeps_naming_the_public_urls(copies):
    prof = mirror.attach(profiles.load("offline"), copies)
    assert (prof.component("aiter").repo, prof.component("atom").provenance().split("@")[0]) == (AITER_URL, ATOM_URL)
    assert (prof.mirror, prof.read_from("atom")) == (copies, str(copies / "atom.git"))


def test_a_repo_the_profile_names_by_path_is_read_in_place(copies, tmp_path):
    local = str(git_init(tmp_path / "mine.git"))
    prof = mirror.attach(profiles.load("default", {"components.atom.repo": local}), copies)
    assert (prof.read_from("aiter"), prof.read_from("atom")) == (str(copies / "aiter.git"), local)


def test_without_a_mirror_every_repo_is_read_where_the_profile_says():
    prof = profiles.load("default")
    assert (prof.mirror, prof.read_from("aiter"), prof.read_from("atom")) == (None, AITER_URL, ATOM_URL)


# ---- settings: --mirror, then ATOM_BUILD_MIRROR, then invoke.yaml cleanbuild.mirror ------------------------------

def test_the_environment_variable_sets_the_mirror_of_the_request(copies, monkeypatch):
    monkeypatch.setenv(mirror.ENV, str(copies))
    request = settings.resolve({"profile": "default"}, None)
    assert (request.mirror, request.profile.read_from("aiter")) == (copies, str(copies / "aiter.git"))


def test_the_flag_beats_the_variable_which_beats_invoke_yaml(copies, tmp_path, monkeypatch):
    other = tmp_path / "other"
    for name in ("aiter.git", "atom.git"):
        git_init(other / name)
    assert settings.resolve({}, {"mirror": str(copies)}).mirror == copies
    monkeypatch.setenv(mirror.ENV, str(other))
    assert settings.resolve({}, {"mirror": str(copies)}).mirror == other
    assert settings.resolve({"mirror": str(copies)}, {"mirror": str(other)}).mirror == copies


@pytest.mark.parametrize(("from_flag", "where"), [(True, "--mirror"), (False, "invoke.yaml: cleanbuild.mirror")])
def test_a_bad_mirror_is_named_where_it_came_from(from_flag, where, tmp_path):
    nope = {"mirror": str(tmp_path / "nope")}
    with pytest.raises(UsageError) as info:
        settings.resolve(nope if from_flag else {}, None if from_flag else nope)
    assert one_line(info).startswith(f"{where} {tmp_path / 'nope'} is not a folder.")


def test_a_missing_copy_from_the_flag_names_the_flag(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError) as info:
        settings.resolve({"mirror": str(tmp_path / "empty"), "profile": "offline"}, None)
    assert one_line(info).startswith(f"--mirror {tmp_path / 'empty'} has no aiter.git, the copy of {AITER_URL}.")


# ---- the plan: same keys, same labels; the git stages read the context's copies ---------------------------------

def plan_of(prof: profiles.Profile) -> P.Plan:
    return P.make_plan(prof, build_of(Arch.GFX950, prof, ck_free=True, run_id="r1"))


@pytest.mark.parametrize("name", ["default", "offline"])
def test_a_mirror_changes_no_key_and_no_lock_digest(name, copies):
    plain, mirrored = plan_of(profiles.load(name)), plan_of(mirror.attach(profiles.load(name), copies))
    assert [(u.name, u.key) for u in mirrored.units] == [(u.name, u.key) for u in plain.units]
    assert mirrored.prepare.lock_digest == plain.prepare.lock_digest


def test_a_mirrored_plan_fetches_the_context_copies_and_names_the_urls(copies):
    plan = plan_of(mirror.attach(profiles.load("offline"), copies))
    aiter, atom = dict(plan.unit("aiter").args), dict(plan.unit("atom").args)
    assert (aiter["AITER_REPO"], atom["ATOM_REPO"]) == (AITER_URL, ATOM_URL)
    assert (aiter["AITER_FROM"], atom["ATOM_FROM"]) == ("/local/repos/aiter.git", "/local/repos/atom.git")
    assert plan.prepare.repos == (("aiter", copies / "aiter.git"), ("atom", copies / "atom.git"))


def test_without_a_mirror_the_git_stages_read_the_urls():
    plan = plan_of(profiles.load("offline"))
    aiter, atom = dict(plan.unit("aiter").args), dict(plan.unit("atom").args)
    assert (aiter["AITER_REPO"], aiter["AITER_FROM"], atom["ATOM_FROM"], plan.prepare.repos) == (AITER_URL, "", "", ())


def test_the_clean_image_labels_name_the_url_through_a_mirror(copies):
    plan = plan_of(mirror.attach(profiles.load("offline"), copies))
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now")
    assert dict(clean_labels(plan, rec))[metadata.label("source.atom")] == f"{ATOM_URL}@{ATOM_PIN}"


# ---- the lock: read through the mirror, unchanged ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["default", "offline"])
def test_the_committed_lock_matches_the_pins_read_through_the_mirror(name, upstream, upstream_sets):
    mirrored = mirror.attach(profiles.load(name), upstream)
    assert lock.check(mirrored) == []
    # the same inputs as the same commits read from a repo the profile names by path
    assert lock.inputs(mirrored) == lock.inputs(profiles.load(name, upstream_sets))


# ---- an offline profile without a mirror and without the network: one line, exit 3 ------------------------------

def test_an_offline_profile_that_cannot_reach_its_repo_says_to_set_the_mirror():
    with pytest.raises(EnvironmentProblem) as info:
        mirror.require_reachable(profiles.load("offline", {"components.aiter.repo": NOWHERE}))
    assert one_line(info).startswith(f"the offline profile failed because it cannot reach the repository {NOWHERE} because ")
    assert (str(info.value).endswith(FIX), info.value.exit_code) == (True, 3)


def test_a_mirrored_offline_profile_probes_nothing(copies):
    mirror.require_reachable(mirror.attach(profiles.load("offline", {"components.aiter.repo": NOWHERE}), copies))


def test_the_default_profile_is_not_probed():
    mirror.require_reachable(profiles.load("default", {"components.aiter.repo": NOWHERE}))


def outcome(capsys, monkeypatch, *argv: str) -> tuple[int, list[str]]:
    """(exit code, stderr lines) of `atom-build ARGV` through the real Program, the engine never contacted."""
    monkeypatch.setattr(engine, "client", lambda: pytest.fail("the engine was contacted"))
    with pytest.raises(SystemExit) as info:
        AtomBuild().run(["atom-build", *argv])
    return info.value.code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_plan_offline_unreachable_is_one_line_exit_3(capsys, monkeypatch):
    code, lines = outcome(capsys, monkeypatch, "plan", "--profile", "offline", "--arch", "gfx950", "--ck-free",
                          "--set", f"components.aiter.repo={NOWHERE}")
    assert (code, len(lines)) == (3, 1), lines
    assert lines[0].startswith("error: the offline profile failed because it cannot reach") and lines[0].endswith(FIX)


@pytest.mark.parametrize("task", ["plan", "lock", "pins"])
def test_a_mirror_lacking_a_copy_is_one_line_exit_2(task, tmp_path, capsys, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(mirror.ENV, str(tmp_path / "empty"))
    code, lines = outcome(capsys, monkeypatch, task, "--profile", "offline")
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(f"error: ${mirror.ENV} {tmp_path / 'empty'} has no aiter.git, the copy of ")


# ---- git-fetch.sh --from: the commit and its tags from the copy, the URL as the checkout's origin -----------------

def test_git_fetch_reads_the_copy_and_keeps_the_url_as_origin(upstream, tmp_path):
    dest = tmp_path / "aiter"
    script = DOCKER_DIR / "scripts" / "git-fetch.sh"
    subprocess.run(["sh", str(script), AITER_URL, AITER_PIN, str(dest), "--from", str(upstream / "aiter.git")],  # noqa: S603,S607
                   check=True, capture_output=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(dest), *args], check=True, capture_output=True,  # noqa: S603,S607
                              text=True).stdout.strip()

    assert (git("remote", "get-url", "origin"), git("rev-parse", "HEAD")) == (AITER_URL, AITER_PIN)
    assert git("describe", "--tags").startswith("v0.1.19-38-g79366eb")  # the copy's tags came with the commit


def test_git_fetch_refuses_an_option_as_the_copy(tmp_path):
    script = DOCKER_DIR / "scripts" / "git-fetch.sh"
    result = subprocess.run(["sh", str(script), ATOM_URL, ATOM_PIN, str(tmp_path / "x"), "--from", "--upload-pack=x"],  # noqa: S603,S607
                            capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr.splitlines()[0].split(" is not")[0]) == (2, "git-fetch: --upload-pack=x")
