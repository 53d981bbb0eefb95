"""cleanbuild.core.metadata: the strict versions.json reader, fed what docker/scripts/write_versions.py writes."""

from __future__ import annotations

import hashlib
import json

import pytest

from cleanbuild.core import metadata
from cleanbuild.core.errors import UsageError
from cleanbuild.core.metadata import read_versions
from tests.support.scripts import load_script
from tests.support.upstream import AITER_PIN, ATOM_PIN

# The manifest's `sources` as collect_wheels.py writes them (from each build stage's SOURCE.json).
MANIFEST = {
    "schema": 2, "arch": "gfx950", "ck_mode": "ckfree", "lock_sha256": "sha256:" + "1" * 64,
    "sources": {"aiter": {"sha": AITER_PIN, "date": "2026-08-03T10:00:00+00:00", "describe": "v0.1.19-38-g79366eb",
                          "repo": "/local/repos/aiter.git"},
                "atom": {"sha": ATOM_PIN, "date": "2026-07-31T10:00:00+00:00", "describe": "v0.1.6-rc0-201-g181b0f46d",
                         "repo": "/local/repos/atom.git"}},
    "wheels": [],
}
INSTALLED = {"torch": "2.11.0+rocm7.2", "triton-rocm": "3.6.0", "amd-aiter": "0.1.20.dev38+g79366eb81",
             "atom": "0.1.1.dev1+g181b0f46d", "flydsl": "0.2.4"}




@pytest.fixture
def written(tmp_path, monkeypatch) -> dict:
    """What write_versions.facts() produces in a clean image (ROCm 7.2, CK-free, gfx950), through JSON."""
    script = load_script("write_versions")
    monkeypatch.setattr(script, "rocm_version", lambda: "7.2.0.70200-43~24.04")
    monkeypatch.setattr(script, "torch_hip", lambda: "7.2.26015")
    monkeypatch.setattr(script, "dist_version", lambda names: next((INSTALLED[n] for n in names if n in INSTALLED), None))
    monkeypatch.setenv("ATOM_BUILD_CK_MODE", "ckfree")
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST, indent=1, sort_keys=True) + "\n")
    return json.loads(json.dumps(script.facts("gfx950", tmp_path)))


def test_reads_what_write_versions_writes(written):
    facts = read_versions(written, "img")
    assert (facts.arch, facts.ck_mode, facts.rocm_release) == ("gfx950", "ckfree", "7.2.0")


def test_versions_for_the_tag_are_normalised(written):
    facts = read_versions(written, "img")
    assert (facts.aiter, facts.atom) == ("0.1.20.dev38+g79366eb81", "0.1.1.dev1+g181b0f46d")


def test_sources_and_digests_round_trip(written, tmp_path):
    facts = read_versions(written, "img")
    manifest_digest = "sha256:" + hashlib.sha256((tmp_path / "manifest.json").read_bytes()).hexdigest()
    assert (facts.sources["aiter"].sha, facts.sources["atom"].describe) == (AITER_PIN, "v0.1.6-rc0-201-g181b0f46d")
    assert (facts.lock_sha256, facts.manifest_sha256) == (MANIFEST["lock_sha256"], manifest_digest)


def test_an_image_that_does_not_say_its_ck_mode_is_refused(tmp_path, monkeypatch):
    script = load_script("write_versions")
    monkeypatch.setattr(script, "torch_hip", lambda: None)
    monkeypatch.delenv("ATOM_BUILD_CK_MODE", raising=False)
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    with pytest.raises(UsageError, match="ck_mode 'None' is not one of ck, ckfree"):
        read_versions(script.facts("gfx942", tmp_path), "img")


@pytest.mark.parametrize("data", [[], "versions", None, 3])
def test_non_objects_are_refused(data):
    with pytest.raises(UsageError) as info:
        read_versions(data, "img:tag")
    assert str(info.value).startswith("img:tag: versions.json is not a JSON object")


@pytest.mark.parametrize("schema", [1, None, "2", 3])
def test_other_schemas_are_refused(written, schema):
    with pytest.raises(UsageError) as info:
        read_versions({**written, "schema": schema}, "img")
    assert f"versions.json has schema {schema!r}, this tool reads 2" in str(info.value)


@pytest.mark.parametrize("key", ["arch", "ck_mode", "packages"])
def test_missing_keys_are_named(written, key):
    data = {k: v for k, v in written.items() if k != key}
    with pytest.raises(UsageError) as info:
        read_versions(data, "img")
    assert f"versions.json lacks or mangles '{key}'" in str(info.value)


@pytest.mark.parametrize("mode", ["CK", "ck-free", "1", ""])
def test_unknown_ck_mode_is_named(written, mode):
    with pytest.raises(UsageError) as info:
        read_versions({**written, "ck_mode": mode}, "img")
    assert f"ck_mode {mode!r} is not one of ck, ckfree" in str(info.value)


@pytest.mark.parametrize("arch", ["gfx942;gfx950", "gfx90a", "../x"])
def test_unknown_arch_is_named(written, arch):
    """The release repository is named after the arch: a versions.json may not put anything there."""
    with pytest.raises(UsageError) as info:
        read_versions({**written, "arch": arch}, "img")
    assert f"arch {arch!r} is not one of gfx942, gfx950" in str(info.value)


def test_release_repo_per_arch_and_ck_mode():
    assert (metadata.release_repo("r", "gfx942", "ck"), metadata.release_repo("r", "gfx942", "ckfree")) == (
        "r/atom-gfx942", "r/atom-gfx942-ckfree")


def test_release_repo_refuses_an_unknown_ck_mode():
    with pytest.raises(UsageError, match="CK mode 'CK' is not one of ck, ckfree"):
        metadata.release_repo("r", "gfx942", "CK")


def test_image_labels():
    labels = {"io.atom-build.arch": "gfx942", "io.atom-build.ck-mode": "ckfree", "other": "x"}
    assert (metadata.image_labels(labels), metadata.image_labels(None)) == (("gfx942", "ckfree"), (None, None))
