"""cleanbuild.images.prepare without Docker: the wheels build context is made whole or not at all, from the plan's data.

(The stand-in base itself needs mmdebstrap and an engine: the integration tier builds it.)"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from cleanbuild.core.errors import StepFailed
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import plan as P
from cleanbuild.images import prepare
from cleanbuild.upstream import profiles
from tests.support.requests import build_of

ROOT = Path(__file__).resolve().parents[2]


def tiny_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)  # noqa: S603,S607
    return path


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "contexts").iterdir() if p.name.startswith("."))


def test_default_context_holds_the_scripts_and_the_profiles_locks(tmp_path):
    plan = P.make_plan(profiles.load("default"), build_of(Arch.GFX942, cache_dir=tmp_path))
    made = prepare.prepare(plan, image_exists=lambda ref: pytest.fail(f"no stand-in to look up, asked {ref}"))
    ctx = plan.prepare.context
    assert made == {"context": str(ctx), "context_reused": False}
    assert sorted(p.name for p in (ctx / "lock").iterdir()) == ["aiter-build.txt", "build.txt", "deps.txt", "sdists.txt"]
    assert (ctx / "lock" / "deps.txt").read_text() + (ctx / "lock" / "sdists.txt").read_text() != ""
    for name in ("build.txt", "deps.txt", "sdists.txt", "aiter-build.txt"):  # never the header: it names both pins
        assert "atom-build-lock" not in (ctx / "lock" / name).read_text()
    assert (ctx / "docker" / "scripts" / "git-fetch.sh").read_bytes() == (ROOT / "docker/scripts/git-fetch.sh").read_bytes()
    assert json.loads((ctx / "PREPARED.json").read_text()) == {"key": plan.prepare.key}
    assert (list((ctx / "local" / "repos").iterdir()), leftovers(tmp_path)) == ([], [])


def test_an_existing_context_is_reused(tmp_path):
    plan = P.make_plan(profiles.load("default"), build_of(Arch.GFX942, cache_dir=tmp_path))
    prepare.prepare(plan, image_exists=lambda ref: True)
    assert prepare.prepare(plan, image_exists=lambda ref: True)["context_reused"] is True


def test_a_missing_lock_fails_naming_it_and_leaves_no_context(tmp_path, profile_dir):
    (profile_dir / "default.build.lock").unlink()
    plan = P.make_plan(profiles.load("default", path=profile_dir / "default.toml"),
                       build_of(Arch.GFX942, cache_dir=tmp_path / "cache"))
    with pytest.raises(StepFailed, match=f"{profile_dir / 'default.build.lock'} is missing. To fix, run `invoke lock --profile default`"):
        prepare.prepare(plan, image_exists=lambda ref: True)
    assert not plan.prepare.context.exists()


def test_a_lock_made_for_other_pins_is_refused_before_anything_is_made(tmp_path):
    """The stages never see the lock's header (it names both pins): the host checks it, in the prepare step."""
    plan = P.make_plan(profiles.load("offline", {"components.atom.ref": "ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21"}),
                       build_of(Arch.GFX950, cache_dir=tmp_path))
    with pytest.raises(StepFailed, match="the lock was made for atom 181b0f46dfd783bfc083f42d88b3de59f02171bf, the "
                                         "profile pins ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21. To fix, run `invoke lock"):
        prepare.prepare(plan, image_exists=lambda ref: True)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def offline_plan(tmp_path, repos: dict[str, Path]) -> P.Plan:
    """The offline profile with tiny local repositories and no local wheel (pip download is not unit-tier work)."""
    sets = {"components.torch.source": "index", **{f"components.{n}.repo": str(p) for n, p in repos.items()}}
    return P.make_plan(profiles.load("offline", sets), build_of(Arch.GFX942, cache_dir=tmp_path / "cache"))


def test_offline_context_holds_copies_of_the_local_repositories(tmp_path):
    plan = offline_plan(tmp_path, {n: tiny_repo(tmp_path / f"{n}-src.git") for n in ("aiter", "atom")})
    made = prepare.prepare(plan, image_exists=lambda ref: ref == plan.base_image)
    repos = plan.prepare.context / "local" / "repos"
    assert made["standin"] == plan.base_image
    assert sorted(p.name for p in repos.iterdir()) == ["aiter.git", "atom.git"] and (repos / "aiter.git" / "HEAD").is_file()


def test_a_read_only_source_repository_gives_a_removable_copy(tmp_path):
    src = tiny_repo(tmp_path / "ro.git")
    for path in (src, *src.rglob("*")):
        path.chmod(path.stat().st_mode & ~0o222)
    plan = offline_plan(tmp_path, {"aiter": src, "atom": tiny_repo(tmp_path / "atom.git")})
    prepare.prepare(plan, image_exists=lambda ref: True)
    copy = plan.prepare.context / "local" / "repos" / "aiter.git"
    assert [p for p in (copy, *copy.rglob("*")) if not p.stat().st_mode & stat.S_IWUSR] == []


def test_a_local_repo_that_is_not_a_repository_fails_and_leaves_no_context(tmp_path):
    (tmp_path / "plain").mkdir()
    plan = offline_plan(tmp_path, {"aiter": tmp_path / "plain", "atom": tiny_repo(tmp_path / "atom.git")})
    with pytest.raises(StepFailed, match=f"{tmp_path / 'plain'} is not a git repository"):
        prepare.prepare(plan, image_exists=lambda ref: True)
    assert (plan.prepare.context.exists(), leftovers(tmp_path / "cache")) == (False, [])
