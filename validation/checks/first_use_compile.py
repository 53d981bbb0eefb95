"""first-use-compile: would a first request compile a Triton kernel? The image's Triton cache (TRITON_CACHE_DIR,
described by /opt/atom-build/triton-cache.json) against the calls the image makes for its models, replayed by
`python -m validation.tritoncache check` in a process of its own (this one may run Triton's interpreter, which
compiles nothing): every kernel must be a cache hit, and every launcher stub must come from the cache with no C
compiler. A cache for another arch, target, Triton or environment is as good as none, and the failure says why.
"""

from __future__ import annotations

import os

from validation.checks.context import Context
from validation.checks.report import Case, CheckResult

NAME = "first-use-compile"


def run(ctx: Context) -> CheckResult:
    from validation.warmcache import prove

    if ctx.on_gpu and not ctx.info.is_amd:
        return CheckResult.from_cases(NAME, [Case.skipped(
            "first use", "triton-cache", f"the image's cache is for its AMD arch; this device is {ctx.info.name} "
            "(the NVIDIA demonstration runs `python -m validation.tritoncache` with --target cuda:<capability>)")])
    if ctx.ck_mode is None:
        return CheckResult.from_cases(NAME, [Case.skipped("first use", "triton-cache", "the image's CK mode is not "
                                                          "known (ATOM_BUILD_CK_MODE unset): pass --ck-mode")])
    if os.environ.get("ATOM_BUILD_WARM") == "off" and not prove.MANIFEST.is_file():
        return CheckResult.from_cases(NAME, [Case.skipped(
            "first use", "triton-cache", "the build turned the warm step off (profile warm.enabled = false): "
            "every Triton kernel the image runs compiles at its first call")])
    source = ctx.aiter_root if ctx.aiter_from_source else None
    result, why = prove.replay(ctx.arch.name, ctx.ck_mode, ctx.model, tuple(ctx.tp), aiter_src=source)
    if result is None:
        return CheckResult.from_cases(NAME, [Case.verdict("first use", False, "triton-cache", why)])
    ok, line = prove.summary(result)
    cases = [Case.verdict("first use", ok and not result["compiled_at_first_use"], "triton-cache", line)]
    cases += [Case.verdict("replay", False, "triton-cache", f) for f in result["failures"][:5]]
    launch = result["launch_path"]
    if launch.startswith("not checked"):
        cases.append(Case.skipped("launch path", "triton-cache", launch))
    else:
        cases.append(Case.verdict("launch path", not launch.startswith("FAILED"), "triton-cache", launch))
    return CheckResult.from_cases(NAME, cases, {"triton_cache": result})
