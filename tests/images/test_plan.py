"""cleanbuild.images.plan: the pure planner. Same inputs, same plan; nothing written; a key over everything a build reads."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from cleanbuild.core import metadata
from cleanbuild.core.errors import UsageError
from cleanbuild.core.spec import DOCKER_DIR
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import buildx, dockerfile, release
from cleanbuild.images import plan as P
from cleanbuild.images.buildx_argv import cache_flags
from cleanbuild.images.record import BuildRecord
from cleanbuild.upstream import profiles
from tests.support.imports import closure
from tests.support.requests import build_of
from tests.support.upstream import AITER_HEAD

ROOT = Path(__file__).resolve().parents[2]


def make(profile="default", overrides=None, path=None, **kw):
    opts = build_of(kw.pop("arch", Arch.GFX942), **kw)
    return P.make_plan(profiles.load(profile, overrides, path), opts)


def wheels_args(plan) -> dict[str, str]:
    return dict(plan.wheels.build_args)


@pytest.fixture
def docker_copy(tmp_path, monkeypatch) -> Path:
    """docker/ copied to tmp_path and made the planner's DOCKER_DIR, so a test may change its bytes."""
    folder = tmp_path / "docker"
    shutil.copytree(DOCKER_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(P, "DOCKER_DIR", folder)
    return folder


# ---- purity ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["default", "offline"])
def test_same_inputs_give_equal_plans(profile):
    assert make(profile) == make(profile)


@pytest.mark.parametrize("profile", ["default", "offline"])
def test_planning_writes_nothing(profile, tmp_path):
    cache = tmp_path / "cache"
    plan = make(profile, cache_dir=cache, model=tmp_path)
    assert not cache.exists()
    assert plan.prepare.context.is_relative_to(cache) and plan.options.run_dir.is_relative_to(cache)


def test_plan_and_its_parts_are_frozen():
    plan = make()
    for obj, attr in ((plan, "base_image"), (plan.options, "arch"), (plan.wheels, "image"),
                      (plan.validate, "command"), (plan.prepare, "key")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, None)


# ---- the content key ------------------------------------------------------------------------------------------

def test_key_changes_with_the_arch():
    assert make(arch=Arch.GFX950).wheels_key != make().wheels_key


def test_key_changes_with_the_ck_mode():
    assert make(ck_free=True).wheels_key != make().wheels_key


VARIANTS = [(Arch.GFX942, False), (Arch.GFX942, True), (Arch.GFX950, False), (Arch.GFX950, True)]


def unit_keys(profile: str, unit: str, overrides=None) -> set[str]:
    return {make(profile, overrides, arch=arch, ck_free=ck_free).unit(unit).key for arch, ck_free in VARIANTS}


def test_a_triton_only_aiter_wheel_is_one_unit_for_every_arch_and_ck_mode():
    """AITER_TRITON_ONLY=1 (the offline profile): aiter's setup.py reads neither the arch nor the CK mode, so a
    matrix builds its wheel once; each variant keeps its own wheels, clean and candidate images, with its arch."""
    assert len(unit_keys("offline", "aiter")) == 1
    assert all(len(unit_keys("offline", name)) == 4 for name in ("wheels", "clean", "candidate"))
    plan = make("offline", arch=Arch.GFX950, ck_free=True)
    assert (wheels_args(plan)["GPU_ARCH"], wheels_args(plan)["ENABLE_CK"]) == ("gfx950", "0")


@pytest.mark.parametrize("profile,overrides", [("default", None), ("offline", {"components.aiter.triton_only": "false"})])
def test_a_compiled_aiter_wheel_is_one_unit_per_arch_and_ck_mode(profile, overrides):
    assert len(unit_keys(profile, "aiter", overrides)) == 4


def test_key_changes_with_a_pin():
    assert make(overrides={"components.aiter.ref": AITER_HEAD}).wheels_key != make().wheels_key


def test_key_changes_with_a_typed_switch():
    assert make(overrides={"components.aiter.prebuild_kernels": "false"}).wheels_key != make().wheels_key


def test_key_is_over_content_not_location(docker_copy):
    """The copied docker/ folder gives the same key: only bytes (and relative names) count."""
    monkeypatched = make().wheels_key
    with pytest.MonkeyPatch.context() as m:
        m.setattr(P, "DOCKER_DIR", ROOT / "docker")
        assert make().wheels_key == monkeypatched


@pytest.mark.parametrize("script", ["collect_wheels.py", "git-fetch.sh", "with-ca.sh", "make-venv.sh"])
def test_key_changes_with_a_helper_scripts_bytes(docker_copy, script):
    before = make()
    path = docker_copy / "scripts" / script
    path.write_bytes(path.read_bytes() + b"\n# changed\n")
    after = make()
    assert (after.wheels_key != before.wheels_key, after.prepare.context != before.prepare.context) == (True, True)


def test_key_changes_with_a_new_helper_file(docker_copy):
    before = make().wheels_key
    (docker_copy / "scripts" / "new-helper.sh").write_text("true\n")
    assert make().wheels_key != before


def test_key_changes_with_the_wheels_dockerfile(docker_copy):
    before = make().wheels_key
    path = docker_copy / "Dockerfile.wheels"
    path.write_text(path.read_text() + "\n# changed\n")
    assert make().wheels_key != before


def test_clean_image_name_changes_with_the_clean_dockerfile(docker_copy):
    before = make()
    path = docker_copy / "Dockerfile.clean"
    path.write_text(path.read_text() + "\n# changed\n")
    after = make()
    assert (after.clean.image != before.clean.image, after.wheels_key == before.wheels_key) == (True, True)


@pytest.mark.parametrize("lock_file", ["default.lock", "default.build.lock"])
def test_key_changes_with_the_lock_files_bytes(profile_dir, lock_file):
    path = profile_dir / "default.toml"
    before = make(path=path).wheels_key
    lock = profile_dir / lock_file
    lock.write_text(lock.read_text() + "# changed\n")
    assert make(path=path).wheels_key != before


def test_clean_build_uses_the_wheels_image_and_the_atom_layer_of_the_same_plan():
    plan = make(arch=Arch.GFX950, ck_free=True)
    args = dict(plan.clean.build_args)
    assert {k: args[k] for k in ("WHEELS_IMAGE", "ATOM_IMAGE", "GPU_ARCH", "ENABLE_CK")} == {
        "WHEELS_IMAGE": plan.wheels.image, "ATOM_IMAGE": plan.unit("atom-layer").image, "GPU_ARCH": "gfx950",
        "ENABLE_CK": "0"}


def test_the_layers_start_from_each_other():
    plan = make()
    assert dict(plan.unit("atom-layer").args)["VENV_IMAGE"] == plan.unit("venv").image
    venv = dict(plan.unit("venv").args)
    assert (venv["WHEELS_IMAGE"], venv["BASE_IMAGE"]) == (plan.wheels.image, plan.base_image)


def test_patch_builds_on_the_clean_image_and_warms_the_profiles_models():
    plan = make("offline")
    assert dict(plan.patch.build_args) == {"IMAGE": plan.clean.image, "WARM_MODELS": "qwen3-30b-a3b",
                                           "WARM_MODEL_CONFIG": "", "WARM_TP": "1 8"}


def test_the_warm_step_reads_the_models_config_json_as_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{\n "hidden_size": 32,\n "model_type": "llama"\n}\n')
    args = dict(make(model=tmp_path).patch.build_args)
    assert args["WARM_MODEL_CONFIG"] == '{"hidden_size":32,"model_type":"llama"}'


def test_a_models_config_that_is_not_json_is_bad_input(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2")
    with pytest.raises(UsageError, match=f"--model {tmp_path}: its config.json is not readable JSON"):
        make(model=tmp_path)


def test_a_profile_without_the_warm_step_passes_no_warm_arguments():
    plan = make("offline", {"warm.enabled": "false"})
    assert [k for k, _ in plan.patch.build_args] == ["IMAGE"]


# ---- build arguments ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["default", "offline"])
@pytest.mark.parametrize("arch", list(Arch))
@pytest.mark.parametrize("ck_free", [False, True])
def test_every_build_arg_is_declared_by_its_dockerfile(profile, arch, ck_free):
    plan = make(profile, arch=arch, ck_free=ck_free)
    for spec in plan.builds:
        undeclared = {k for k, _ in spec.build_args} - dockerfile.declared_args(spec.dockerfile)
        assert undeclared == set(), spec.step
        buildx.check_build_args(spec)


def test_an_undeclared_build_arg_is_refused():
    spec = make().wheels
    spec = dataclasses.replace(spec, build_args=(*spec.build_args, ("AITER_BRANCH", "main")))
    with pytest.raises(UsageError) as info:
        buildx.check_build_args(spec)
    assert "Dockerfile.wheels does not consume build argument(s) AITER_BRANCH" in str(info.value)


def test_dockerfile_args_reads_global_and_stage_args(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS a\n  ARG GPU_ARCH=gfx942\nRUN echo ARG NOT_ONE\n")
    assert dockerfile.declared_args(path) == {"BASE_IMAGE", "GPU_ARCH"}


@pytest.mark.parametrize("value,expected", [("false", "0"), ("0", "0"), ("true", "1")])
def test_prebuild_kernels_override_reaches_the_build(value, expected):
    plan = make("offline", {"components.aiter.prebuild_kernels": value})
    assert wheels_args(plan)["PREBUILD_KERNELS"] == expected


def test_default_builds_prebuilt_kernels_with_ck():
    args = wheels_args(make())
    assert (args["PREBUILD_KERNELS"], args["ENABLE_CK"], args["AITER_TRITON_ONLY"]) == ("1", "1", "0")


def test_flydsl_is_not_a_build_argument():
    """flydsl comes with the lock, exactly as aiter pins it."""
    assert not [k for k in wheels_args(make()) if k.startswith("FLYDSL")]


# ---- local sources (a repo named by path; a mirror: tests/upstream/test_mirror.py) ---------------------------------

def test_a_repo_named_by_path_is_fetched_from_its_context_copy(tmp_path):
    sets = {f"components.{n}.repo": str(tmp_path / f"{n}.git") for n in ("aiter", "atom")}
    plan = make("offline", sets)
    args = wheels_args(plan)
    assert (args["AITER_REPO"], args["ATOM_REPO"]) == ("/local/repos/aiter.git", "/local/repos/atom.git")
    assert plan.prepare.repos == (("aiter", tmp_path / "aiter.git"), ("atom", tmp_path / "atom.git"))


def test_default_plan_fetches_from_github_and_prepares_no_repository():
    plan = make()
    args = wheels_args(plan)
    assert (args["AITER_REPO"], args["ATOM_REPO"], plan.prepare.repos) == (
        "https://github.com/ROCm/aiter.git", "https://github.com/ROCm/ATOM.git", ())


def test_offline_plan_fetches_the_local_torch_wheel():
    assert make("offline").prepare.local_wheels == (("torch", "torch==2.13.0+cpu", "https://download.pytorch.org/whl/cpu"),)


def test_offline_base_is_the_stand_in_named_by_its_spec():
    plan = make("offline")
    assert plan.base_image == P.standin_image(plan.prepare.standin) == wheels_args(plan)["BASE_IMAGE"]


def test_default_base_is_the_pinned_digest():
    plan = make()
    assert plan.base_image == profiles.load("default").base_ref == wheels_args(plan)["BASE_IMAGE"]


# ---- the release repository: one derivation -------------------------------------------------------------------

@pytest.mark.parametrize("ck_free,repo", [(False, "reg/atom-gfx950"), (True, "reg/atom-gfx950-ckfree")])
def test_release_repo(ck_free, repo):
    assert make(arch=Arch.GFX950, ck_free=ck_free, registry="reg").release_repo == repo


def test_plan_and_tag_step_derive_the_release_repo_in_one_place(monkeypatch):
    monkeypatch.setattr(metadata, "release_repo", lambda registry, arch, ck: f"one/{registry}/{arch}/{ck}")
    plan = make(arch=Arch.GFX950, ck_free=True, registry="reg")
    versions = {"schema": 2, "arch": "gfx950", "ck_mode": "ckfree", "packages": {"aiter": "0.1.20", "atom": "0.1.1"}}
    monkeypatch.setattr(release.engine, "read_json", lambda client, image, path, run_id: versions)
    rec = BuildRecord(run_id="r", started=0.0, started_at="now", candidate_id="sha256:x")
    _, repo = release.release_tag(None, plan.options, rec)
    assert (plan.release_repo, repo) == ("one/reg/gfx950/ckfree", "one/reg/gfx950/ckfree")


# ---- the containers -------------------------------------------------------------------------------------------

def test_validation_mounts_validation_read_only():
    plan = make()
    assert (str(ROOT / "validation"), "/opt/atom-build/validation", "ro") in plan.validate.mounts


@pytest.mark.parametrize("ck_free,mode", [(False, "ck"), (True, "ckfree")])
def test_validation_is_told_the_ck_mode_and_arch(ck_free, mode):
    command = list(make(arch=Arch.GFX950, ck_free=ck_free).validate.command)
    assert command[command.index("--ck-mode") + 1] == mode and command[command.index("--arch") + 1] == "gfx950"


def test_validation_runs_without_network():
    assert make().validate.network == "none"


def test_offline_validation_runs_on_the_cpu_interpreter():
    spec = make("offline").validate
    assert (spec.gpu, dict(spec.env)["TRITON_INTERPRET"]) == (False, "1")


def test_default_validation_runs_on_the_gpu():
    assert make().validate.gpu is True


def test_device_option_beats_the_profile():
    spec = make(device="cpu").validate
    assert (spec.gpu, dict(spec.env).get("TRITON_INTERPRET")) == (False, "1")


def test_smoke_is_skipped_without_a_model():
    plan = make()
    assert plan.smoke is None and "no --model" in plan.smoke_skip_reason


def test_atom_smoke_runs_atoms_example_on_the_model(tmp_path):
    spec = make(model=tmp_path).smoke
    command = list(spec.command)
    assert (str(tmp_path), "/model", "ro") in spec.mounts and spec.gpu is True
    assert command[command.index("--") + 1:] == ["python", "-m", "atom.examples.simple_inference", "--model",
                                                 "/model", "--max-tokens", "10", "--temperature", "0"]


def test_cpu_smoke_has_no_generation_command(tmp_path):
    spec = make("offline", model=tmp_path).smoke
    assert spec.command[2] == "cpu" and "--" not in spec.command and spec.gpu is False


def test_smoke_gpu_override_reaches_the_container(tmp_path):
    assert make(overrides={"smoke.gpu": "false"}, model=tmp_path).smoke.gpu is False


def test_two_runs_share_the_content_keyed_images_but_not_containers():
    a, b = make(run_id="r1"), make(run_id="r2")
    assert (a.wheels.image, a.clean.image, a.patch.image) == (b.wheels.image, b.clean.image, b.patch.image)
    assert (a.validate.name != b.validate.name, a.options.run_dir != b.options.run_dir) == (True, True)


@pytest.mark.parametrize("changed", ["patches/catalog/tuned_gemm_hipblaslt.py", "validation/warmcache/plan.py",
                                     "validation/core/models.py", "validation/tritoncache.py"])
def test_candidate_name_changes_with_the_patches_and_the_warm_code(tmp_path, monkeypatch, changed):
    before = make().patch.image
    for folder in ("patches", "validation"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(P, "REPO_ROOT", tmp_path)
    assert make().patch.image == before
    (tmp_path / changed).write_text((tmp_path / changed).read_text() + "\n# changed\n")
    assert make().patch.image != before


def test_what_the_warm_step_does_not_run_is_not_in_the_candidates_key(tmp_path, monkeypatch):
    before = make().patch.image
    for folder in ("patches", "validation"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(P, "REPO_ROOT", tmp_path)
    (tmp_path / "validation" / "checks" / "lds_budget.py").write_text("# changed\n")
    assert make().patch.image == before


# ---- the commands build-clean runs ----------------------------------------------------------------------------

def test_ca_bundle_is_a_secret_and_never_a_build_arg(tmp_path):
    pem = tmp_path / "corp-ca.pem"
    plan = make(ca_bundle=pem, builder="farm")
    builds = [argv for argv in P.commands(plan) if argv[:3] == ["docker", "buildx", "build"]]
    assert len(builds) == len(plan.units)  # one build per keyed image
    for argv in builds:
        assert argv[argv.index("--secret") + 1] == f"id=ca,src={pem}"
        assert argv[argv.index("--builder") + 1] == "farm"
        build_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
        assert build_args and not [a for a in build_args if str(pem) in a or "corp-ca" in a]


def test_no_secret_without_a_ca_bundle():
    assert not [a for argv in P.commands(make()) for a in argv if a == "--secret"]


def test_commands_end_with_the_release_tag():
    plan = make()
    assert P.commands(plan)[-1][:3] == ["docker", "tag", plan.patch.image]


# ---- the registry build cache ---------------------------------------------------------------------------------

@pytest.mark.parametrize("registry,remote", [
    ("atom-build", False), ("team/atom", False), ("localhost/atom", True), ("localhost:5000/atom", True),
    ("ghcr.io/org/atom-build", True), ("registry:5000/x", True),
])
def test_a_registry_is_remote_when_it_names_a_host(registry, remote):
    assert build_of(Arch.GFX942, registry=registry).remote is remote


def test_no_cache_flags_for_a_local_registry():
    plan = make()
    assert cache_flags(plan.wheels, plan.options) == ()


def test_inline_cache_for_a_remote_registry():
    plan = make(registry="localhost:5000/ab")
    repo = "localhost:5000/ab/wheels"
    assert cache_flags(plan.wheels, plan.options) == (
        "--cache-to", "type=inline", "--cache-from", plan.wheels.image, "--cache-from", f"{repo}:gfx942-ck-latest")


def test_registry_cache_exports_every_stage():
    plan = make(registry="localhost:5000/ab", cache="registry", ck_free=True)
    ref = "type=registry,ref=localhost:5000/ab/clean:gfx942-ckfree-buildcache"
    assert cache_flags(plan.clean, plan.options) == ("--cache-from", ref, "--cache-to", f"{ref},mode=max")


def test_the_containerd_store_exports_every_stage_to_a_remote_registry_by_default():
    plan = make(registry="localhost:5000/ab", ck_free=True)
    ref = "type=registry,ref=localhost:5000/ab/clean:gfx942-ckfree-buildcache"
    assert cache_flags(plan.clean, plan.options, containerd_store=True) == (
        "--cache-from", ref, "--cache-to", f"{ref},mode=max")


def test_the_containerd_store_adds_no_cache_for_a_local_registry():
    plan = make()
    assert cache_flags(plan.clean, plan.options, containerd_store=True) == ()


def test_cache_none_turns_it_off_for_a_remote_registry():
    plan = make(registry="localhost:5000/ab", cache="none")
    assert cache_flags(plan.wheels, plan.options) == ()


def _validation_imports(path: Path) -> set[str]:
    """The validation modules a file imports anywhere in it (ast), as paths under validation/."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                 if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("validation") else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in (n for n in names if n.startswith("validation.")):
            rel = Path(*name.split(".")[1:])
            for candidate in (ROOT / "validation" / rel / "__init__.py", (ROOT / "validation" / rel).with_suffix(".py")):
                if candidate.is_file():
                    found.add(str(candidate.relative_to(ROOT / "validation")))
    return found


def _closure(program: str) -> set[str]:
    """Every file under validation/ that running this program imports (its import closure, read from the source),
    the packages' __init__.py included."""
    seen = {program} | closure(program, lambda rel: _validation_imports(ROOT / "validation" / rel))
    parents = {"/".join([*Path(rel).parts[:i], "__init__.py"]) for rel in seen for i in range(len(Path(rel).parts))}
    return seen | parents


def _not_sent(files: set[str], sent: tuple[str, ...]) -> list[str]:
    """The files that no entry of sent names (a file, or a folder above it)."""
    return sorted(f for f in files if not any(f == s or f.startswith(f"{s}/") for s in sent))


def test_the_warm_code_is_what_the_warm_step_imports_and_what_the_patch_context_sends():
    """Every validation module the warm program reaches is in the candidate's key (plan.WARM_CODE) and sent by
    .dockerignore into the patch step's context."""
    assert _not_sent(_closure("tritoncache.py"), P.WARM_CODE) == []
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert [name for name in P.WARM_CODE if f"!validation/{name}" not in ignore] == []


def test_the_payload_reader_is_what_its_program_imports_and_what_the_clean_context_sends():
    """`python -m validation.payload` in the clean step reads only what .dockerignore sends, all of it in the clean
    unit's key (plan.READER_FILES beside gpucode/)."""
    sent = (*P.READER_FILES, "gpucode")
    assert _not_sent(_closure("payload.py"), sent) == []
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert [name for name in sent if f"!validation/{name}" not in ignore] == []


def test_a_profile_without_the_warm_step_tells_validation_so():
    env = dict(make("offline", {"warm.enabled": "false"}).validate.env)
    assert env["ATOM_BUILD_WARM"] == "off"
    assert "ATOM_BUILD_WARM" not in dict(make("offline").validate.env)
