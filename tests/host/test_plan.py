import dataclasses
from pathlib import Path

import pytest

from cleanbuild import plan as P
from cleanbuild import profiles
from cleanbuild.arch import Arch
from cleanbuild.errors import UsageError
from cleanbuild.settings import Inputs, load_profile, pick

ROOT = Path(__file__).resolve().parents[2]


def default_plan(**kw):
    opts = P.Options(arch=kw.pop("arch", Arch.GFX942), **kw)
    return P.make_plan(profiles.load("default"), opts)


def test_default_profile_is_complete_and_pinned():
    prof = profiles.load("default")
    assert prof.base_ref.startswith("rocm/dev-ubuntu-24.04:7.2-complete@sha256:")
    assert len(prof.base["digest"].split(":")[1]) == 64
    for name in ("aiter", "atom", "triton_kernels"):
        comp = prof.component(name)
        assert comp.source == "git" and len(str(comp.fields["ref"])) == 40, name
    assert prof.pinned == "2026-11-29" and prof.python == "3.12"


def test_plan_is_pure_and_immutable():
    plan = default_plan()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.python = "3.9"  # type: ignore[misc]
    assert default_plan() .wheels_key == plan.wheels_key  # same inputs, same key
    args = dict(plan.wheels.build_args)
    assert args["GPU_ARCH"] == "gfx942" and args["ENABLE_CK"] == "1" and args["PREBUILD_KERNELS"] == "1"
    assert args["AITER_REF"] == "024344700df39b0d78a57f0b626b00fe2661b861"


def test_content_key_follows_arch_ck_and_pins():
    base = default_plan()
    assert default_plan(arch=Arch.GFX950).wheels_key != base.wheels_key
    assert default_plan(ck_free=True).wheels_key != base.wheels_key
    assert "ckfree" in default_plan(ck_free=True).wheels.image
    pinned = profiles.load("default", {"components.aiter.ref": "f" * 40})
    assert P.make_plan(pinned, P.Options(arch=Arch.GFX942)).wheels_key != base.wheels_key


def test_clean_build_uses_the_matching_wheels_image_and_one_arch():
    plan = default_plan(arch=Arch.GFX950, ck_free=True)
    args = dict(plan.clean.build_args)
    assert args["WHEELS_IMAGE"] == plan.wheels.image
    assert args["GPU_ARCH"] == "gfx950" and ";" not in args["GPU_ARCH"] and args["ENABLE_CK"] == "0"
    assert dict(plan.patch.build_args)["IMAGE"] == plan.clean.image


def test_every_build_arg_is_declared_by_its_dockerfile():
    for arch in Arch:
        for ck_free in (False, True):
            for spec in default_plan(arch=arch, ck_free=ck_free).builds:
                P.check_build_args(spec)


def test_unknown_build_arg_is_refused(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nARG GPU_ARCH\n")
    spec = P.BuildSpec("x", dockerfile, tmp_path, None, (("GPU_ARCH", "gfx942"), ("GPU_ARCHS", "x")), "img")
    with pytest.raises(UsageError, match="does not consume build argument\\(s\\) GPU_ARCHS"):
        P.check_build_args(spec)


def test_commands_are_the_exact_argv():
    plan = default_plan(builder="farm", ca_bundle=Path("/etc/ssl/ca.pem"), progress="plain")
    cmds = P.commands(plan)
    wheels = cmds[0]
    assert wheels[:3] == ["docker", "buildx", "build"]
    assert wheels[wheels.index("--builder") + 1] == "farm"
    assert wheels[wheels.index("--secret") + 1] == "id=ca,src=/etc/ssl/ca.pem"
    assert "ca.pem" not in " ".join(a for a in wheels if a.startswith("--build-arg"))
    validate = cmds[3]
    assert validate[:2] == ["docker", "run"] and "--network" in validate and "none" in validate
    assert "/dev/kfd" in validate and "seccomp=unconfined" in validate
    assert any(m.endswith("/opt/atom-build/validation:ro") for m in validate)


def test_smoke_is_planned_only_with_a_model(tmp_path):
    assert default_plan().smoke is None and "no --model" in default_plan().smoke_skip_reason
    plan = default_plan(model=tmp_path)
    assert plan.smoke is not None and (str(tmp_path), "/model", "ro") in plan.smoke.mounts
    assert "--min-tokens" in plan.smoke.command and "/model" in plan.smoke.command


def test_two_runs_do_not_collide():
    a, b = default_plan(run_id="r1"), default_plan(run_id="r2")
    assert a.patch.image != b.patch.image and a.validate.name != b.validate.name
    assert a.wheels.image == b.wheels.image  # the shared, content-keyed part is shared on purpose


def test_offline_plan_needs_its_context(tmp_path):
    prof = profiles.load("offline")
    with pytest.raises(UsageError, match="offline"):
        P.make_plan(prof, P.Options(arch=Arch.GFX942))
    plan = P.make_plan(prof, P.Options(arch=Arch.GFX942, context=tmp_path, base_image="standin:x"))
    assert plan.wheels.context == tmp_path and dict(plan.wheels.build_args)["BASE_IMAGE"] == "standin:x"
    assert dict(plan.wheels.build_args)["PREBUILD_KERNELS"] == "0"
    assert plan.validate.gpu is False and ("TRITON_INTERPRET", "1") in plan.validate.env


def test_precedence_flag_over_config_over_default():
    assert pick("flag", {"builder": "conf"}, "builder") == "flag"
    assert pick(None, {"builder": "conf"}, "builder") == "conf"
    assert pick(None, {}, "progress") == "auto"
    conf = {"profile": "default", "overrides": {"components.aiter.ref": "a" * 40, "components.atom.ref": "b" * 40}}
    prof = load_profile(Inputs(sets=("components.aiter.ref=" + "c" * 40,)), conf)
    assert prof.component("aiter").fields["ref"] == "c" * 40  # the flag wins
    assert prof.component("atom").fields["ref"] == "b" * 40  # config beats the file


@pytest.mark.parametrize("sets,match", [
    (("nokey",), "KEY=VALUE"),
    (("components.nope.ref=x",), "does not name a profile entry"),
    (("components.aiter.source=svn",), "source is 'svn'"),
])
def test_bad_overrides(sets, match):
    with pytest.raises(UsageError, match=match):
        load_profile(Inputs(sets=sets), {})


def test_unknown_profile_and_bad_toml(tmp_path):
    with pytest.raises(UsageError, match="not found.*default\\|offline"):
        profiles.load("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [")
    with pytest.raises(UsageError, match="not valid TOML"):
        profiles.load("bad", path=bad)
    partial = tmp_path / "partial.toml"
    partial.write_text('python = "3.12"\n[base]\nimage = "x"\n[components.torch]\nsource = "local"\n')
    with pytest.raises(UsageError, match="lacks components triton, aiter, atom, deps"):
        profiles.load("partial", path=partial)
