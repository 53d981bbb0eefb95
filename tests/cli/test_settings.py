"""cleanbuild.cli.settings with cleanbuild.cli.options: the invoke.yaml `cleanbuild:` section, the precedence rule, and flags
+ config -> Request."""

from __future__ import annotations

import re

import pytest

from cleanbuild.cli import options
from cleanbuild.cli.options import BY_NAME, Given
from cleanbuild.cli.settings import resolve, site_config
from cleanbuild.core import spec
from cleanbuild.core.errors import UsageError
from cleanbuild.gpuhost.arch import Arch

A40, B40, C40 = "a" * 40, "b" * 40, "c" * 40


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---- site_config ----------------------------------------------------------------------------------------------

def test_no_section_is_an_empty_config():
    assert site_config(None) == {}


def test_known_keys_pass_through():
    raw = {"profile": "offline", "registry": "localhost:5000/atom", "gpu": 0, "cache": "inline", "overrides": {}}
    assert site_config(raw) == raw


@pytest.mark.parametrize("raw,kind", [([1, 2], "list"), ("offline", "str"), (3, "int")])
def test_section_must_be_a_mapping(raw, kind):
    with pytest.raises(UsageError) as info:
        site_config(raw)
    assert f"`cleanbuild:` must be a mapping, not {kind}" in one_line(info)


def test_unknown_key_is_named():
    with pytest.raises(UsageError) as info:
        site_config({"profil": "offline"})
    assert "unknown key cleanbuild.profil" in one_line(info) and "profile" in str(info.value)


@pytest.mark.parametrize("key,value,types", [
    ("cache", True, "str"), ("registry", 5, "str"), ("overrides", ["a"], "dict"), ("gpu", 1.5, "str or int"),
])
def test_wrong_type_is_named(key, value, types):
    with pytest.raises(UsageError) as info:
        site_config({key: value})
    assert f"cleanbuild.{key} is {value!r}, not {types}" in one_line(info)


# ---- precedence -----------------------------------------------------------------------------------------------

def given(name: str, flags: dict, config: dict) -> Given:
    return options.given(BY_NAME[name], flags, config, {})


def test_flag_beats_config():
    assert given("builder", {"builder": "flag"}, {"builder": "conf"}) == Given("flag", "--builder")


def test_config_beats_default():
    assert given("progress", {}, {"progress": "plain"}) == Given("plain", "invoke.yaml: cleanbuild.progress")


def test_default_when_neither_is_given():
    assert given("progress", {}, {}) == Given("auto", "the default progress")


def test_empty_flag_and_empty_config_fall_through():
    assert given("progress", {"progress": ""}, {"progress": ""}).value == "auto"


def test_an_empty_gpu_flag_is_given_not_every_gpu():
    assert given("gpu", {"gpu": ""}, {"gpu": "0"}) == Given("", "--gpu")


def test_a_config_only_option_is_no_flag_and_a_flag_only_option_no_key():
    assert given("cache", {"cache": "none"}, {"cache": "inline"}).where == "invoke.yaml: cleanbuild.cache"
    assert given("arch", {}, {"arch": "gfx942"}) == Given(None, "the default arch")


def test_set_beats_config_overrides_beat_the_file():
    conf = {"overrides": {"components.aiter.ref": A40, "components.atom.ref": B40}}
    prof = resolve({"set": [f"components.aiter.ref={C40}"]}, conf).profile
    assert (prof.component("aiter").ref, prof.component("atom").ref) == (C40, B40)


def test_the_overrides_in_force_are_kept_for_a_relock():
    conf = {"overrides": {"components.aiter.ref": A40, "components.atom.ref": B40}}
    request = resolve({"set": [f"components.aiter.ref={C40}"]}, conf)
    assert dict(request.overrides) == {"components.aiter.ref": C40, "components.atom.ref": B40}


def test_profile_from_config():
    request = resolve({}, {"profile": "offline"})
    assert (request.profile.name, request.profile_from) == ("offline", "invoke.yaml: cleanbuild.profile")


def test_profile_flag_is_named_as_its_source():
    assert resolve({"profile": "offline"}, {"profile": "default"}).profile_from == "--profile"


def test_profile_as_a_toml_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('inherits = "offline"\nname = "mine"\n')
    prof = resolve({"profile": str(path)}, {}).profile
    assert (prof.name, prof.file, prof.python) == ("mine", path, "3.11")


def test_a_flag_no_request_takes_is_a_programming_error():
    with pytest.raises(TypeError, match="not request flags: \\['archs'\\]"):
        resolve({"archs": "gfx942"}, {})


def test_the_raw_config_is_checked_by_resolve():
    with pytest.raises(UsageError, match="unknown key cleanbuild.profil"):
        resolve({}, {"profil": "offline"})


# ---- registry -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["atom-build", "localhost:5000/atom", "ghcr.io/org/atom-build", "a.b_c/d-e"])
def test_valid_registries(name):
    assert resolve({}, {"registry": name}).registry == name


@pytest.mark.parametrize("name", ["Atom Build", "host:port:x", "UPPER/atom", "a//b", "atom/", "-atom", "a:b"])
def test_invalid_registries_are_refused(name):
    with pytest.raises(UsageError) as info:
        resolve({}, {"registry": name})
    assert one_line(info) == (f"invoke.yaml: cleanbuild.registry {name!r} is not a valid image repository prefix "
                              "(host[:port]/path, lower case). To fix, correct invoke.yaml: cleanbuild.registry.")


def test_registry_default():
    assert resolve({}, {}).registry == "atom-build"


def test_registry_flag_beats_config():
    assert resolve({"registry": "localhost:5000/flag"}, {"registry": "conf"}).registry == "localhost:5000/flag"


# ---- the request ------------------------------------------------------------------------------------------------

def test_the_arch_and_ck_mode_given_reach_the_build():
    build = resolve({"arch": "gfx950", "ck_free": True}, {}).build(Arch.GFX950)
    assert (build.arch, build.ck_mode, build.request.ck_free) == (Arch.GFX950, "ckfree", True)


def test_a_matrix_task_takes_several_archs():
    assert resolve({"arch": "gfx942,gfx950"}, {}, matrix=True).arch == (Arch.GFX942, Arch.GFX950)


def test_a_single_arch_task_refuses_a_list():
    with pytest.raises(UsageError):
        resolve({"arch": "gfx942,gfx950"}, {})


def test_no_arch_is_left_to_the_host_or_the_image():
    assert resolve({}, {}).arch == ()


def test_each_build_gets_its_own_run_id():
    request = resolve({}, {})
    assert request.build(Arch.GFX942).run_id != request.build(Arch.GFX942).run_id


def test_missing_ca_bundle_is_named(tmp_path):
    with pytest.raises(UsageError) as info:
        resolve({"ca_bundle": str(tmp_path / "no.pem")}, {})
    assert f"--ca-bundle {tmp_path / 'no.pem'} is not a file" in one_line(info)


def test_missing_ca_bundle_from_config_names_the_key(tmp_path):
    with pytest.raises(UsageError) as info:
        resolve({}, {"ca_bundle": str(tmp_path / "no.pem")})
    assert one_line(info).startswith(f"invoke.yaml: cleanbuild.ca_bundle {tmp_path / 'no.pem'} is not a file")


def test_ca_bundle_from_config_is_resolved(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert resolve({}, {"ca_bundle": str(pem)}).ca_bundle == pem.resolve()


def test_ca_bundle_none_means_no_bundle():
    assert resolve({"ca_bundle": "none"}, {"ca_bundle": "/etc/hosts"}).ca_bundle is None


def test_ca_bundle_auto_takes_what_this_host_trusts(tmp_path, monkeypatch):
    pem = tmp_path / "host.pem"
    pem.write_text("x")
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    assert resolve({}, {}).ca_bundle == pem.resolve()


def test_ca_bundle_auto_without_any_bundle_is_none(monkeypatch, tmp_path):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setattr(options, "HOST_BUNDLES", (str(tmp_path / "absent.crt"),))
    assert options.ca_bundle("auto") is None


def test_unknown_cache_mode_is_refused_under_its_key():
    with pytest.raises(UsageError) as info:
        resolve({}, {"cache": "always"})
    assert one_line(info) == ("invoke.yaml: cleanbuild.cache 'always' is not one of auto, inline, registry, none. "
                              "To fix, use one of those.")


def test_model_must_be_a_folder(tmp_path):
    with pytest.raises(UsageError) as info:
        resolve({"model": str(tmp_path / "none")}, {})
    assert f"--model {tmp_path / 'none'} is not a folder" in one_line(info)


def test_model_is_a_resolved_path(tmp_path):
    assert resolve({"model": str(tmp_path)}, {}).model == tmp_path.resolve()


def test_bad_progress_in_invoke_yaml_is_named_by_its_key():
    with pytest.raises(UsageError) as info:
        resolve({}, {"progress": "loud"})
    assert one_line(info) == ("invoke.yaml: cleanbuild.progress 'loud' is not one of auto, plain, tty, quiet. "
                              "To fix, use one of those.")


def test_bad_progress_flag_is_named_by_the_flag():
    with pytest.raises(UsageError) as info:
        resolve({"progress": "loud"}, {"progress": "plain"})
    assert one_line(info) == "--progress 'loud' is not one of auto, plain, tty, quiet. To fix, use one of those."


def test_a_good_progress_flag_wins_over_a_bad_config_value_it_replaces():
    assert resolve({"progress": "plain"}, {"progress": "tty"}).progress == "plain"


def test_bad_device_is_refused():
    with pytest.raises(UsageError, match="--device 'rocm' is not cpu or cuda"):
        resolve({"device": "rocm"}, {})


@pytest.mark.parametrize("flag,config,gpus", [
    (None, {"gpu": "0,2"}, (0, 2)), (None, {"gpu": 1}, (1,)), ("3", {"gpu": "0,2"}, (3,)),
    (None, {"gpu": "all"}, None), (None, {}, None),
])
def test_gpus_parse_with_precedence(flag, config, gpus):
    assert resolve({"gpu": flag}, config).gpu == gpus


def test_bad_gpus_are_refused():
    with pytest.raises(UsageError, match="^--gpu 'first' is not a list of GPU indices"):
        resolve({"gpu": "first"}, {})


def test_bad_gpus_in_invoke_yaml_are_named_by_the_key():
    with pytest.raises(UsageError, match="^invoke.yaml: cleanbuild.gpu 'first' is not a list of GPU indices"):
        resolve({}, {"gpu": "first"})


@pytest.mark.parametrize("flags,config,where", [
    ({"user_id": "alice"}, {}, "--user-id 'alice'"),
    ({}, {"user_id": "alice"}, "invoke.yaml: cleanbuild.user_id 'alice'"),
])
def test_a_user_id_that_is_not_numeric_is_named_where_it_came_from(flags, config, where):
    with pytest.raises(UsageError) as info:
        resolve(flags, config)
    assert one_line(info).startswith(f"{where} is not UID or UID:GID. To fix")


@pytest.mark.parametrize("flags,config,where", [
    ({"builder": "--x"}, {}, "--builder '--x'"), ({}, {"builder": "--x"}, "invoke.yaml: cleanbuild.builder '--x'"),
])
def test_a_bad_builder_is_named_where_it_came_from(flags, config, where):
    with pytest.raises(UsageError) as info:
        resolve(flags, config)
    assert one_line(info).startswith(f"{where} is not a buildx builder name. To fix")


def test_user_flag_beats_config():
    assert resolve({"user": "flag"}, {"user": "conf"}).user == "flag"


def test_cache_dir_from_config(tmp_path):
    assert resolve({}, {"cache_dir": str(tmp_path)}).cache_dir == tmp_path.resolve()


def test_run_ids_are_unique_and_sortable():
    ids = {spec.new_run_id() for _ in range(50)}
    assert len(ids) == 50 and all(re.fullmatch(r"\d{14}-[0-9a-f]{6}", i) for i in ids)
