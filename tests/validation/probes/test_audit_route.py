"""audit's `route` finding on the real aiter and ATOM at the pins, patched as an image holds them: a CK-free image
whose Qwen3-30B-A3B route needs CK modules is PRESENT, naming the layers and modules; with CK only FlyDSL (not in
this test's site) is absent; with no model and no manifest the finding is unknown."""

from __future__ import annotations

import json

from audit_helpers import make_context

from validation.probes import serving
from validation.probes.image import PRESENT, UNKNOWN


def test_a_ck_free_image_that_cannot_serve_its_model_is_present(patched_site, fake_root):
    ctx = make_context(patched_site, fake_root, arch="gfx950", env={"ATOM_BUILD_CK_MODE": "ckfree"},
                       model="qwen3-30b-a3b")
    f = serving.route(ctx)
    assert f.status == PRESENT
    assert "cannot serve qwen3-30b-a3b" in f.evidence[0]
    experts = [e for e in f.evidence if " model.layers.mlp.experts [FusedMoE] " in e]
    assert experts and "module_moe_ck2stages" in experts[0] and "module_moe_asm" in experts[0]


def test_the_models_come_from_the_images_manifest(patched_site, fake_root):
    manifest = fake_root / "opt/atom-build/triton-cache.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"models": ["llama3-8b"]}))
    f = serving.route(make_context(patched_site, fake_root, arch="gfx950", env={"ATOM_BUILD_CK_MODE": "ck"}))
    missing = {e.rsplit(" lacks ", 1)[1] for e in f.evidence if " lacks " in e}
    assert f.evidence[0].startswith("a ck image cannot serve llama3-8b") and missing == {"flydsl"}


def test_no_model_is_unknown(patched_site, fake_root):
    f = serving.route(make_context(patched_site, fake_root, arch="gfx950", env={"ATOM_BUILD_CK_MODE": "ckfree"}))
    assert f.status == UNKNOWN and "give --model" in f.evidence[-1]
