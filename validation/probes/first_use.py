"""The `first-use-compile` finding: would a first request compile a Triton kernel in this image? The same replay as
validation's check (validation.warmcache.prove) against the image's cache, for the models its manifest names
(else audit's --model): PRESENT when a kernel the image runs is not in it, naming the kernels and why (another arch,
another Triton, no cache at all); unknown for an image with no manifest and no --model."""

from __future__ import annotations

from validation.core.archs import ck_mode_from_env
from validation.probes import pyenv
from validation.probes.image import OK, PRESENT, UNKNOWN, Finding, Image


def first_use_compile(ctx: Image) -> Finding:
    from validation.warmcache import prove

    f = Finding("first-use-compile", "no Triton kernel the image runs compiles at its first call", UNKNOWN,
                fix="rebuild with build-clean (its patch step warms the cache for the image's arch, models and Triton)")
    try:
        mode = ck_mode_from_env(ctx.env)
    except ValueError as exc:
        mode, why = None, str(exc)
    else:
        why = "the image says nothing of its CK mode (ATOM_BUILD_CK_MODE)"
    if ctx.arch is None or mode is None or pyenv.locate(ctx, "aiter") is None or ctx.python is None:
        f.evidence.append("not replayed: " + (why if mode is None else "no arch, no aiter, or not the image's own Python"))
        return f
    result, failed = prove.replay(ctx.arch, mode, ctx.model, ctx.tp, env=ctx.env, manifest=ctx.path(str(prove.MANIFEST)))
    if result is None:  # no manifest and no --model: nothing says which kernels this image runs
        f.evidence.append(failed + ("; give --model to name what compiles at first use" if ctx.model is None else ""))
        return f
    ok, line = prove.summary(result)
    f.status = OK if ok and not result["compiled_at_first_use"] else PRESENT
    f.evidence += [line, f"launch path: {result['launch_path']}", *result["failures"][:3]]
    return f
