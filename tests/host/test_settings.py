"""cleanbuild.settings: the invoke.yaml `cleanbuild:` section, the precedence rule, and task inputs -> Options."""

from __future__ import annotations

import re

import pytest

from cleanbuild import settings
from cleanbuild.arch import Arch
from cleanbuild.errors import UsageError
from cleanbuild.settings import (
    Inputs,
    load_profile,
    options,
    pick,
    registry,
    site_config,
)

A40, B40, C40 = "a" * 40, "b" * 40, "c" * 40


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---- site_config ----------------------------------------------------------------------------------------------

def test_no_section_is_an_empty_config():
    assert site_config(None) == {}


def test_known_keys_pass_through():
    raw = {"profile": "offline", "registry": "localhost:5000/atom", "gpus": 0, "cache": "inline", "overrides": {}}
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
    ("cache", True, "str"), ("registry", 5, "str"), ("overrides", ["a"], "dict"), ("gpus", 1.5, "str or int"),
])
def test_wrong_type_is_named(key, value, types):
    with pytest.raises(UsageError) as info:
        site_config({key: value})
    assert f"cleanbuild.{key} is {value!r}, not {types}" in one_line(info)


# ---- precedence -----------------------------------------------------------------------------------------------

def test_flag_beats_config():
    assert pick("flag", {"builder": "conf"}, "builder") == "flag"


def test_config_beats_default():
    assert pick(None, {"progress": "plain"}, "progress") == "plain"


def test_default_when_neither_is_given():
    assert pick(None, {}, "progress") == "auto"


def test_empty_flag_and_empty_config_fall_through():
    assert pick("", {"progress": ""}, "progress") == "auto"


def test_set_beats_config_overrides_beat_the_file():
    conf = {"overrides": {"components.aiter.ref": A40, "components.atom.ref": B40}}
    prof = load_profile(Inputs(sets=(f"components.aiter.ref={C40}",)), conf)
    assert (prof.component("aiter").get("ref"), prof.component("atom").get("ref")) == (C40, B40)


def test_profile_from_config():
    assert load_profile(Inputs(), {"profile": "offline"}).name == "offline"


def test_profile_as_a_toml_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('inherits = "offline"\nname = "mine"\n')
    prof = load_profile(Inputs(profile=str(path)), {})
    assert (prof.name, prof.file, prof.python) == ("mine", path, "3.11")


# ---- registry -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["atom-build", "localhost:5000/atom", "ghcr.io/org/atom-build", "a.b_c/d-e"])
def test_valid_registries(name):
    assert registry({"registry": name}) == name


@pytest.mark.parametrize("name", ["Atom Build", "host:port:x", "UPPER/atom", "a//b", "atom/", "-atom", "a:b"])
def test_invalid_registries_are_refused(name):
    with pytest.raises(UsageError) as info:
        registry({"registry": name})
    assert f"registry {name!r} is not a valid image repository prefix" in one_line(info)


def test_registry_default():
    assert registry({}) == "atom-build"


def test_registry_flag_beats_config():
    assert registry({"registry": "conf"}, "localhost:5000/flag") == "localhost:5000/flag"


# ---- options --------------------------------------------------------------------------------------------------

def test_options_take_the_arch_given():
    opts = options(Inputs(archs=(Arch.GFX950,), ck_free=True), {})
    assert (opts.arch, opts.ck_mode) == (Arch.GFX950, "ckfree")


def test_missing_ca_bundle_is_named(tmp_path):
    with pytest.raises(UsageError) as info:
        options(Inputs(archs=(Arch.GFX942,), ca_bundle=str(tmp_path / "no.pem")), {})
    assert f"--ca-bundle {tmp_path / 'no.pem'} is not a file" in one_line(info)


def test_missing_ca_bundle_from_config_names_the_key(tmp_path):
    with pytest.raises(UsageError) as info:
        options(Inputs(archs=(Arch.GFX942,)), {"ca_bundle": str(tmp_path / "no.pem")})
    assert f"invoke.yaml cleanbuild.ca_bundle {tmp_path / 'no.pem'} is not a file" in one_line(info)


def test_ca_bundle_from_config_is_resolved(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert options(Inputs(archs=(Arch.GFX942,)), {"ca_bundle": str(pem)}).ca_bundle == pem.resolve()


def test_ca_bundle_none_means_no_bundle():
    assert options(Inputs(archs=(Arch.GFX942,), ca_bundle="none"), {"ca_bundle": "/etc/hosts"}).ca_bundle is None


def test_ca_bundle_auto_takes_what_this_host_trusts(tmp_path, monkeypatch):
    pem = tmp_path / "host.pem"
    pem.write_text("x")
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    assert options(Inputs(archs=(Arch.GFX942,)), {}).ca_bundle == pem.resolve()


def test_ca_bundle_auto_without_any_bundle_is_none(monkeypatch, tmp_path):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setattr(settings, "HOST_BUNDLES", (str(tmp_path / "absent.crt"),))
    assert settings.ca_bundle("auto") is None


def test_unknown_cache_mode_is_refused():
    with pytest.raises(UsageError, match="cleanbuild.cache 'always' is not one of auto, inline, registry, none"):
        options(Inputs(archs=(Arch.GFX942,)), {"cache": "always"})


def test_model_must_be_a_folder(tmp_path):
    with pytest.raises(UsageError) as info:
        options(Inputs(archs=(Arch.GFX942,), model=str(tmp_path / "none")), {})
    assert f"--model {tmp_path / 'none'} is not a folder" in one_line(info)


def test_bad_progress_is_refused():
    with pytest.raises(UsageError, match="^invoke.yaml cleanbuild.progress 'loud' is not one of auto, plain, tty"):
        options(Inputs(archs=(Arch.GFX942,)), {"progress": "loud"})
    with pytest.raises(UsageError, match="^--progress 'loud' is not one of auto, plain, tty"):
        options(Inputs(archs=(Arch.GFX942,), progress="loud"), {"progress": "plain"})


def test_bad_device_is_refused():
    with pytest.raises(UsageError, match="--device 'rocm' is not cpu or cuda"):
        options(Inputs(archs=(Arch.GFX942,), device="rocm"), {})


@pytest.mark.parametrize("flag,config,gpus", [
    (None, {"gpus": "0,2"}, (0, 2)), (None, {"gpus": 1}, (1,)), ("3", {"gpus": "0,2"}, (3,)),
    (None, {"gpus": "all"}, None), (None, {}, None),
])
def test_gpus_parse_with_precedence(flag, config, gpus):
    assert options(Inputs(archs=(Arch.GFX942,), gpus=flag), config).gpus == gpus


def test_bad_gpus_are_refused():
    with pytest.raises(UsageError, match="--gpu 'first' is not a list of GPU indices"):
        options(Inputs(archs=(Arch.GFX942,), gpus="first"), {})


def test_bad_registry_in_config_is_refused_before_any_build():
    with pytest.raises(UsageError, match="registry 'Atom Build'"):
        options(Inputs(archs=(Arch.GFX942,)), {"registry": "Atom Build"})


def test_user_flag_beats_config():
    assert options(Inputs(archs=(Arch.GFX942,), user="flag"), {"user": "conf"}).user == "flag"


def test_cache_dir_from_config(tmp_path):
    assert options(Inputs(archs=(Arch.GFX942,)), {"cache_dir": str(tmp_path)}).cache_dir == tmp_path.resolve()


def test_run_ids_are_unique_and_sortable():
    ids = {settings.new_run_id() for _ in range(50)}
    assert len(ids) == 50 and all(re.fullmatch(r"\d{14}-[0-9a-f]{6}", i) for i in ids)
