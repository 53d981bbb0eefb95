"""invoke verify without an engine: what the labels of a build-clean image give the rebuild (cleanbuild.images.verify)."""

from __future__ import annotations

import pytest

from cleanbuild.cli.settings import resolve
from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import UsageError
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import verify

LABELS = {  # what the clean step writes and the candidate inherits (record.clean_labels, unit_labels, Dockerfile.clean)
    engine.UNIT_LABEL: "candidate", engine.KEY_LABEL: "0" * 64,
    metadata.label("profile"): "offline", metadata.label("arch"): "gfx950", metadata.label("ck-mode"): "ckfree",
    metadata.label("wheels-image"): "127.0.0.1:5000/team/wheels:gfx950-ckfree-0123456789abcdef",
}


def test_label_request_gives_profile_arch_ck_mode_unit_and_registry():
    request, unit, registry = verify.label_request(LABELS, resolve({}, {}), "x")
    assert (request.profile.name, request.arch, request.ck_free, unit, registry) == (
        "offline", (Arch.GFX950,), True, "candidate", "127.0.0.1:5000/team")


def test_the_label_beats_the_invoke_yaml_profile():
    request, _, _ = verify.label_request(LABELS, resolve({}, {"profile": "default"}), "x")
    assert request.profile.name == "offline"


def test_a_given_profile_beats_the_label():
    request, _, _ = verify.label_request(LABELS, resolve({"profile": "default"}, {}), "x")
    assert request.profile.name == "default"


@pytest.mark.parametrize("missing", [engine.UNIT_LABEL, metadata.label("profile"), metadata.label("wheels-image")])
def test_an_image_without_the_labels_is_bad_input(missing):
    labels = {k: v for k, v in LABELS.items() if k != missing}
    with pytest.raises(UsageError) as info:
        verify.label_request(labels, resolve({}, {}), "alpine:3")
    assert str(info.value).startswith("alpine:3 lacks the io.atom-build labels")


def test_summary_names_the_first_differing_layer_and_file():
    result = {"ref": "r", "image": "sha256:" + "a" * 64, "rebuilt": "sha256:" + "b" * 64, "identical": False,
              "difference": {"layer": 7, "diff_ids": ["sha256:1", "sha256:2"], "file": "opt/venv/x.py",
                             "why": "content differ"}}
    assert verify.summary(result) == ("r (sha256:aaaaaaaaaaaa) differs from its rebuild (sha256:bbbbbbbbbbbb): "
                                      "layer 7 (sha256:1 vs sha256:2), file opt/venv/x.py: content differ")
