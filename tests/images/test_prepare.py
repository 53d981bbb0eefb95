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
from cleanbuild.upstream import profiles, wheelindex
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


# ---- the offline profile's CPU torch: from its index or the copy ATOM_BUILD_TORCH_INDEX names, nowhere else ---------

def fake_wheel(folder: Path, filename: str) -> Path:
    """A wheel file pip will pick by its name (pip download reads no more of it with --no-deps)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    name, version = filename.split("-")[:2]
    with zipfile.ZipFile(folder / filename, "w") as whl:
        info = f"{name}-{version}.dist-info"
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    return folder / filename


def torch_plan(tmp_path: Path, where: Path) -> P.Plan:
    profile = wheelindex.attach(profiles.load("offline"), wheelindex.location(str(where)))
    return P.make_plan(profile, build_of(Arch.GFX950, profile, cache_dir=tmp_path / "cache"))


def test_the_cpu_torch_is_fetched_from_the_folder_the_override_names(tmp_path):
    wheels = tmp_path / "wheels"
    fake_wheel(wheels, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    plan = torch_plan(tmp_path, wheels)
    prepare.build_context(plan.prepare, python="3.11")
    assert [p.name for p in (plan.prepare.context / "local" / "torch").iterdir()] == [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_the_cuda_build_of_the_same_number_is_never_taken_and_the_error_is_one_line(tmp_path):
    """PyPI's torch 2.13.0 is the CUDA build: the +cpu pin cannot match it. The line names the wheel, where it was
    looked for and the override; nothing is left behind."""
    wheels = tmp_path / "wheels"
    fake_wheel(wheels, "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    plan = torch_plan(tmp_path, wheels)
    with pytest.raises(StepFailed) as info:
        prepare.build_context(plan.prepare, python="3.11")
    assert str(info.value) == (
        f"fetching torch==2.13.0+cpu for Python 3.11 from {wheels} failed because No matching distribution found for "
        "torch==2.13.0+cpu. To fix, set ATOM_BUILD_TORCH_INDEX to a copy of that index or a folder holding the wheel "
        "(torch-2.13.0+cpu-cp311-...whl).")
    assert (plan.prepare.context.exists(), leftovers(tmp_path / "cache")) == (False, [])


def test_this_machines_pip_configuration_does_not_reach_the_fetch(tmp_path, monkeypatch):
    """A find-links folder in pip's own configuration (this repo's CI machines have one) must not be what makes a build
    work: the fetch reads only the place the profile or the override names."""
    machine = tmp_path / "machine-wheels"
    fake_wheel(machine, "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    (conf := tmp_path / "pip.conf").write_text(f"[global]\nfind-links = {machine}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", str(machine))
    (empty := tmp_path / "empty").mkdir()
    with pytest.raises(StepFailed, match=f"from {empty} failed because No matching distribution found"):
        prepare.build_context(torch_plan(tmp_path, empty).prepare, python="3.11")


def test_the_offline_profile_names_pytorchs_cpu_index_and_the_cpu_build():
    torch = profiles.load("offline").component("torch")
    assert (torch.source, torch.version, profiles.load("offline").read_from("torch")) == (
        "local", "2.13.0+cpu", "https://download.pytorch.org/whl/cpu")
