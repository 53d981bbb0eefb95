"""route: can the image serve its models? Each model's route through ATOM and aiter (validation.routing: read from
their code as the image holds them) must reach only kernels the image has. The models are those the image was
warmed for (its Triton cache manifest), else --model. In a CK-free image a route that may need a module the build
left out fails the check, naming the layer, the op, the aiter function and the module; the build's
--allow-unservable (ATOM_BUILD_ALLOW_UNSERVABLE=1 in the validate container) makes it a warning instead.
"""

from __future__ import annotations

import json
import os

from validation.checks.context import Context
from validation.checks.report import Case, CheckResult

NAME = "route"
ALLOW_ENV = "ATOM_BUILD_ALLOW_UNSERVABLE"


def run(ctx: Context) -> CheckResult:
    from validation.routing import layers
    from validation.warmcache.cache import MANIFEST

    if ctx.ck_mode is None:
        return CheckResult.from_cases(NAME, [Case.skipped("route", "atom", "the image's CK mode is not known "
                                                          "(ATOM_BUILD_CK_MODE unset): pass --ck-mode")])
    models = _models(MANIFEST) or [ctx.model]
    cases, routes = [], []
    allowed = os.environ.get(ALLOW_ENV) == "1"
    for model in models:
        try:
            route = layers.for_image(model, ctx.ck_mode)
        except LookupError as e:
            return CheckResult.from_cases(NAME, [Case.skipped("route", "atom", f"{e} (a route is read in an image)")])
        except ValueError as e:  # a model ATOM has no class for, a config without architectures
            cases.append(Case.verdict(model, False, "atom", f"route: {e}"))
            continue
        routes.append(route.to_json())
        if not route.unservable:
            cases.append(Case.verdict(route.model, True, "atom", f"{len(route.layers)} layers, every kernel present"))
        elif allowed:
            cases.append(Case.warning(route.model, "atom", f"{layers.refusal(route)} (allowed: {ALLOW_ENV}=1)"))
        else:
            cases.append(Case.verdict(route.model, False, "atom", layers.refusal(route)))
    return CheckResult.from_cases(NAME, cases, {"route": routes, "allowed_unservable": allowed})


def _models(manifest) -> list[str]:
    if not manifest.is_file():
        return []
    return list(json.loads(manifest.read_text()).get("models") or [])
