"""The `route` finding: can this image serve its models? Each model's route through ATOM and aiter as the image holds
them (validation.routing, the same walk as validation's route check), for the models its Triton cache manifest
names (else audit's --model): PRESENT when a layer may need a module the image's build left out, naming the layer,
the op, the aiter function and the module, with each model's layers in the evidence; unknown without a model, an
ATOM or an aiter to read."""

from __future__ import annotations

import json

from validation.core import models as presets
from validation.core.archs import ck_mode_from_env
from validation.probes import pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image

MANIFEST = "/opt/atom-build/triton-cache.json"


def route(ctx: Image) -> Finding:
    from validation.routing import layers

    f = Finding("route", "every layer of the image's models reaches only kernels the image has", UNKNOWN,
                fix="build with CK (drop --ck-free), or route the layers named to kernels the image has")
    found = {name: pyenv.locate(ctx, name) for name in ("atom", "aiter", "flydsl")}
    try:
        mode = ck_mode_from_env(ctx.env)
    except ValueError as exc:
        mode, f.evidence = None, [str(exc)]
    models = _models(ctx)
    if mode is None or not models or found["atom"] is None or found["aiter"] is None:
        f.evidence.append("not read: " + ("no CK mode (ATOM_BUILD_CK_MODE)" if mode is None else
                                          "no model (the image has no Triton cache manifest; give --model)"
                                          if not models else "no ATOM or no aiter in the image's Python"))
        return f
    roots = {"atom": found["atom"].path, "aiter": found["aiter"].path}
    f.status = OK
    for model in models:
        name, cfg = presets.load_config(model)
        r = layers.make(str(name), cfg, presets.quantization(cfg), mode, roots, dict(ctx.env),
                        found["flydsl"] is not None)
        if not r.unservable:
            f.evidence.append(f"{r.model}: {len(r.layers)} layers, every kernel present ({r.ck_mode})")
            continue
        f.status = PRESENT
        f.evidence.append(layers.refusal(r))
        f.evidence += [f"{r.model} {lr.layer} [{lr.op or '-'}] lacks "
                       + ", ".join(sorted({k.module or k.name for k in lr.missing})) for lr in r.unservable]
    return f


def _models(ctx: Image) -> list[str]:
    manifest = ctx.path(MANIFEST)
    listed = json.loads(manifest.read_text()).get("models") or [] if manifest.is_file() else []
    named = [m if m in presets.PRESETS else str(ctx.path(m)) for m in listed]
    return named or ([ctx.model] if ctx.model else [])
