"""cleanbuild.upstream.profiles: the two built-in profiles, the schema (one-line errors naming key and file), typed overrides."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from cleanbuild.core.errors import UsageError
from cleanbuild.upstream import profiles
from cleanbuild.upstream.profiles import PROFILE_DIR
from tests.support.upstream import AITER_PIN, ATOM_HEAD, ATOM_PIN


def write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return path


def child(tmp_path, text: str, name: str = "child.toml"):
    """A profile that inherits the built-in default and adds `text`."""
    return write(tmp_path, name, f'inherits = "default"\nname = "child"\n{text}')


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---- the built-in profiles ------------------------------------------------------------------------------------

def test_default_profile_is_a_real_rocm_host():
    prof = profiles.load("default")
    assert (prof.name, prof.offline, prof.python) == ("default", False, "3.12")


def test_default_base_image_is_pinned_by_digest():
    prof = profiles.load("default")
    assert prof.base_ref == ("rocm/dev-ubuntu-24.04:7.2-complete@"
                             "sha256:86e11093b4a7ec2a79b1b6701d10e840a6994f21c7e05929b51eb9be361c683a")


def test_default_pins_aiter_and_atom_by_full_commit():
    prof = profiles.load("default")
    assert (prof.component("aiter").ref, prof.component("atom").ref) == (AITER_PIN, ATOM_PIN)


def test_offline_profile_loads_as_offline_on_python_311():
    prof = profiles.load("offline")
    assert (prof.name, prof.offline, prof.python) == ("offline", True, "3.11")


def test_offline_keeps_the_default_pins_and_repositories():
    """The offline profile substitutes no repository: it pins the public ones (a mirror is only where they are read)."""
    default, offline = profiles.load("default"), profiles.load("offline")
    for name in ("aiter", "atom"):
        assert offline.component(name).ref == default.component(name).ref, name
        assert offline.component(name).repo == default.component(name).repo, name
        assert default.component(name).repo.startswith("https://github.com/ROCm/")
    assert not [line for line in offline.substitutes if line.startswith("repos")]


def test_offline_tables_merge_key_by_key():
    """offline.toml's [components.aiter] sets two switches; repo, ref, branch and max_jobs come from default."""
    aiter = profiles.load("offline").component("aiter")
    assert (aiter.branch, aiter.max_jobs, aiter.triton_only) == ("main", 0, True)


def _leaves(table: dict, prefix: str = ""):
    for key, value in table.items():
        if isinstance(value, dict) and key != "env":
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def test_offline_file_lists_only_substitutions():
    default = dict(_leaves(tomllib.loads((PROFILE_DIR / "default.toml").read_text())))
    offline = dict(_leaves(tomllib.loads((PROFILE_DIR / "offline.toml").read_text())))
    repeated = sorted(k for k, v in offline.items() if k in default and default[k] == v)
    assert repeated == []
    assert "components.aiter.ref" not in offline and "components.atom.ref" not in offline


def test_profile_is_immutable():
    prof = profiles.load("offline")
    with pytest.raises(TypeError):
        prof.validation.env["TRITON_INTERPRET"] = "0"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        prof.name = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        prof.component("aiter").ref = "x"  # type: ignore[misc]
    assert isinstance(prof.component("deps").build, tuple) and isinstance(prof.warm.models, tuple)


# ---- typed values: read by attribute, defaults from the schema -------------------------------------------------

TYPED = (profiles.Profile, profiles.Component, profiles.Base, profiles.Lock, profiles.Validation, profiles.Smoke,
         profiles.Standin, profiles.Warm)


@pytest.mark.parametrize("cls", TYPED, ids=lambda c: c.__name__)
def test_typed_values_offer_no_mapping_reads(cls):
    """Nothing past the loader reads a profile as loose strings: no .get, .section, .fields or .data to call."""
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert not {"get", "section", "fields", "data", "__getitem__"} & set(dir(cls))


@pytest.mark.parametrize(("cls", "section"), [(profiles.Base, "base"), (profiles.Lock, "lock"),
                                              (profiles.Validation, "validation"), (profiles.Smoke, "smoke"),
                                              (profiles.Standin, "standin"), (profiles.Warm, "warm")])
def test_each_table_has_one_attribute_per_schema_key(cls, section):
    assert [f.name for f in dataclasses.fields(cls)] == list(profiles.SCHEMA[section])


def test_a_component_has_one_attribute_per_schema_key():
    names = [f.name for f in dataclasses.fields(profiles.Component)]
    assert names == ["name", *profiles.SCHEMA["components"]["aiter"], "given"]


def test_left_out_keys_read_as_the_schema_defaults(tmp_path):
    """A profile that sets no [smoke], [warm], [validation], [standin], [lock] or aiter switches gets SCHEMA's values."""
    base = tomllib.loads((PROFILE_DIR / "default.toml").read_text())
    comps = "\n".join(f'[components.{n}]\nsource = "{t.get("source", "none")}"\n'
                      + (f'repo = "{t["repo"]}"\nref = "{t["ref"]}"\n' if "ref" in t else "")
                      for n, t in base["components"].items() if n in profiles.REQUIRED_COMPONENTS)
    path = write(tmp_path, "bare.toml", f'name = "bare"\npython = "3.12"\n[base]\nimage = "x:1"\n{comps}')
    prof = profiles.load("bare", path=path)
    assert (prof.smoke, prof.warm, prof.validation.device, prof.standin.suite, prof.lock.python_platform) == (
        profiles.Smoke("atom", (), 10, True), profiles.Warm(True, (), (1, 8)), "cuda", "bookworm", "x86_64-manylinux_2_28")
    aiter = prof.component("aiter")
    assert (aiter.prebuild_kernels, aiter.triton_only, aiter.max_jobs, prof.disk_gib, prof.base.digest) == (True, False, 0, 20.0, "")
    assert (prof.base_ref, prof.component("mori").source, prof.component("mori").build_args()) == ("x:1", "none", {})


def test_an_empty_tp_list_reads_as_the_default_sizes():
    assert profiles.load("default", {"warm.tp": ""}).warm.tp == (1, 8)


def test_build_args_and_the_report_see_only_the_keys_the_profile_set():
    torchvision = profiles.load("default").component("torchvision")
    assert torchvision.build_args() == {"TORCHVISION_VERSION": "0.26.0+rocm7.2"}
    assert torchvision.as_given() == {"version": "0.26.0+rocm7.2"}


# ---- the schema -----------------------------------------------------------------------------------------------

def test_unknown_profile_names_the_choices():
    with pytest.raises(UsageError) as info:
        profiles.load("nope")
    assert "profile 'nope' not found" in one_line(info) and "default|offline" in str(info.value)


def test_unknown_top_level_key_names_key_and_file(tmp_path):
    path = child(tmp_path, 'colour = "red"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    assert "unknown key 'colour'" in one_line(info) and str(path) in str(info.value)


def test_unknown_key_in_a_component_names_its_dotted_path(tmp_path):
    path = child(tmp_path, '[components.aiter]\nreff = "abc"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    assert "unknown key 'components.aiter.reff'" in one_line(info) and str(path) in str(info.value)


def test_unknown_component_is_refused(tmp_path):
    path = child(tmp_path, '[components.vllm]\nsource = "pypi"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    assert "unknown key 'components.vllm'" in one_line(info) and str(path) in str(info.value)


def test_components_as_a_string_is_refused(tmp_path):
    path = write(tmp_path, "bad.toml", 'name = "bad"\npython = "3.12"\ncomponents = "aiter"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("bad", path=path)
    assert "components must be a table" in one_line(info) and str(path) in str(info.value)


def test_non_numeric_disk_gib_is_refused(tmp_path):
    path = child(tmp_path, 'disk_gib = "lots"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    assert "disk_gib is 'lots', not a number" in one_line(info) and str(path) in str(info.value)


def test_unquoted_python_version_is_refused_as_a_float(tmp_path):
    """`python = 3.10` is the float 3.1 to TOML: taking it would build for Python 3.1."""
    path = child(tmp_path, "python = 3.10\n")
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    message = one_line(info)
    assert "python is 3.1, not a string" in message and "quote it" in message and str(path) in message


def test_boolean_is_not_a_number(tmp_path):
    path = child(tmp_path, "disk_gib = true\n")
    with pytest.raises(UsageError, match="disk_gib is True, not a number"):
        profiles.load("child", path=path)


def test_a_source_no_stage_knows_is_refused(tmp_path):
    path = child(tmp_path, '[components.aiter]\nsource = "svn"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    assert "components.aiter.source is 'svn'" in one_line(info) and str(path) in str(info.value)


def test_a_source_the_component_has_no_stage_for_is_refused(tmp_path):
    path = child(tmp_path, '[components.aiter]\nsource = "pypi"\nversion = "0.1.7"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("child", path=path)
    message = one_line(info)
    assert "components.aiter.source is 'pypi'; use one of git" in message and str(path) in message


def test_a_git_source_needs_repo_and_ref(tmp_path):
    path = write(tmp_path, "p.toml", (PROFILE_DIR / "default.toml").read_text().replace(
        'ref = "181b0f46dfd783bfc083f42d88b3de59f02171bf"\n', ""))
    with pytest.raises(UsageError, match="components.atom is a git source without repo and ref"):
        profiles.load("p", path=path)


def test_missing_required_key_is_named(tmp_path):
    path = write(tmp_path, "p.toml", 'python = "3.12"\n')
    with pytest.raises(UsageError, match=r"p\.toml lacks name"):
        profiles.load("p", path=path)


def test_missing_required_components_are_named(tmp_path):
    path = write(tmp_path, "p.toml", 'name = "p"\npython = "3.12"\n[base]\nimage = "x"\n'
                                     '[components.torch]\nsource = "local"\n')
    with pytest.raises(UsageError, match="lacks components triton, aiter, atom, deps"):
        profiles.load("p", path=path)


def test_invalid_toml_names_the_file(tmp_path):
    path = write(tmp_path, "p.toml", "name = [\n")
    with pytest.raises(UsageError) as info:
        profiles.load("p", path=path)
    assert f"profile {path} is not valid TOML" in one_line(info)


def test_inherits_loop_is_refused(tmp_path):
    write(tmp_path, "a.toml", 'inherits = "b"\nname = "a"\n')
    write(tmp_path, "b.toml", 'inherits = "a"\nname = "b"\n')
    with pytest.raises(UsageError) as info:
        profiles.load("a", path=tmp_path / "a.toml")
    assert "inherits itself" in one_line(info) and str(tmp_path / "a.toml") in str(info.value)


def test_copied_profile_folder_inherits_from_beside_itself(profile_dir):
    default = profile_dir / "default.toml"
    default.write_text(default.read_text().replace(ATOM_PIN, ATOM_HEAD))
    prof = profiles.load("offline", path=profile_dir / "offline.toml")
    assert prof.component("atom").ref == ATOM_HEAD


def test_a_profile_elsewhere_inherits_the_built_in_default(tmp_path):
    prof = profiles.load("child", path=child(tmp_path, ""))
    assert (prof.name, prof.component("aiter").ref) == ("child", AITER_PIN)


# ---- typed overrides ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["false", "0", "no", "off", "False"])
def test_prebuild_kernels_override_is_a_bool(value):
    prof = profiles.load("default", {"components.aiter.prebuild_kernels": value})
    assert prof.component("aiter").prebuild_kernels is False


@pytest.mark.parametrize("value", ["true", "1", "yes", "on"])
def test_true_override_is_a_bool(value):
    prof = profiles.load("offline", {"components.aiter.prebuild_kernels": value})
    assert prof.component("aiter").prebuild_kernels is True


def test_smoke_gpu_override_is_a_bool():
    prof = profiles.load("default", {"smoke.gpu": "false"})
    assert prof.smoke.gpu is False


def test_offline_override_is_a_bool():
    prof = profiles.load("offline", {"offline": "false"})
    assert prof.offline is False


def test_yaml_values_keep_their_type():
    """invoke.yaml gives typed values: a YAML false is False, a YAML int is taken for a float key."""
    prof = profiles.load("default", {"smoke.gpu": False, "disk_gib": 50})
    assert prof.smoke.gpu is False and prof.disk_gib == 50.0


def test_numeric_override_is_converted():
    prof = profiles.load("default", {"disk_gib": "12.5", "components.aiter.max_jobs": "8"})
    assert (prof.disk_gib, prof.component("aiter").max_jobs) == (12.5, 8)


def test_list_override_is_split_on_commas():
    prof = profiles.load("default", {"components.deps.build": "zmq, other"})
    assert prof.component("deps").build == ("zmq", "other")


def test_table_of_strings_override_sets_one_entry():
    prof = profiles.load("offline", {"validation.env.GPU_ARCHS": "gfx942"})
    assert dict(prof.validation.env) == {"TRITON_INTERPRET": "1", "GPU_ARCHS": "gfx942"}


@pytest.mark.parametrize("key,value,named", [
    ("disk_gib", "abc", "disk_gib='abc' is not a number"),
    ("components.aiter.prebuild_kernels", "maybe", "components.aiter.prebuild_kernels='maybe' is not true or false"),
    ("components.aiter.max_jobs", "1.5", "components.aiter.max_jobs='1.5' is not a whole number"),
    ("smoke.mode", "gpu", "smoke.mode='gpu' is not one of 'atom', 'cpu'"),
    ("disk_gib", True, "disk_gib=True is not a number"),
])
def test_override_of_the_wrong_type_is_refused(key, value, named):
    with pytest.raises(UsageError) as info:
        profiles.load("default", {key: value})
    assert f"override {named}" in one_line(info)


@pytest.mark.parametrize("key", ["colour", "components.vllm.ref", "components.aiter.reff", "base.image.tag"])
def test_override_of_an_unknown_key_is_refused(key):
    with pytest.raises(UsageError) as info:
        profiles.load("default", {key: "x"})
    assert f"override {key!r} does not name a profile entry" in one_line(info)


def test_override_of_a_table_is_refused():
    with pytest.raises(UsageError, match="'components.aiter' names a table"):
        profiles.load("default", {"components.aiter": "x"})


def test_override_with_a_source_the_component_has_no_stage_for_is_refused():
    with pytest.raises(UsageError, match="components.aiter.source is 'pypi'; use one of git"):
        profiles.load("default", {"components.aiter.source": "pypi"})


def test_parse_sets_splits_at_the_first_equals_sign():
    assert profiles.parse_sets(["validation.env.X=a=b", "disk_gib=1"]) == {"validation.env.X": "a=b", "disk_gib": "1"}


@pytest.mark.parametrize("item", ["oops", "=value"])
def test_parse_sets_needs_key_and_value(item):
    with pytest.raises(UsageError) as info:
        profiles.parse_sets([item])
    assert f"--set {item!r} is not KEY=VALUE" in one_line(info)


# ---- the inheritance chain (what pins --bump edits) -------------------------------------------------------------


def test_chain_is_the_files_load_merges_child_first(tmp_path):
    path = child(tmp_path, "")
    assert profiles.chain(path) == [path, PROFILE_DIR / "default.toml"]
    assert profiles.chain(PROFILE_DIR / "offline.toml") == [PROFILE_DIR / "offline.toml", PROFILE_DIR / "default.toml"]


def test_chain_prefers_a_parent_beside_the_child_and_reads_inherits_as_toml(tmp_path):
    parent = write(tmp_path, "default.toml", 'name = "local"\n')
    path = write(tmp_path, "child.toml", "inherits = 'default'  # single quotes are TOML too\n")
    assert profiles.chain(path) == [path, parent]


def test_chain_stops_where_load_refuses(tmp_path):
    loop = write(tmp_path, "a.toml", 'inherits = "b"\n')
    other = write(tmp_path, "b.toml", 'inherits = "a"\n')
    missing = write(tmp_path, "c.toml", 'inherits = "nowhere"\n')
    assert (profiles.chain(loop), profiles.chain(missing)) == ([loop, other], [missing])
