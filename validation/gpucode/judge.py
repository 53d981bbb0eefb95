"""A payload manifest judged for one arch: the verdicts audit's `payload` finding and validation's `payload` check
both give (one rule set, two reports).

PRESENT when code for another arch sits in a family the runtime loads by folder (aiter's assembly kernels: a wrong
get_gpu_arch() would load them instead of failing), when a folder named for one arch holds another's code, when
a family the image ships has code for other archs but none for the image's, or when a family the runtime needs has
none at all (aiter's assembly kernels where aiter is installed: its loader wants hsa/<arch>/, whatever else is
left; the "prebuilt with zero kernels" image). Multi-arch bundles (a prebuilt module,
torch's kernels) are not foreign code: the HIP runtime loads the entry that matches the device. The base image's
code is reported as information: no layer of ours can remove it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from validation.gpucode.scan import AITER_ASM, AITER_MODULES, TRITON_CACHE

OK, PRESENT, INFO = "ok", "PRESENT", "info"
BY_FOLDER = (AITER_ASM,)  # families whose loader picks a folder by arch
FAMILIES = (AITER_ASM, AITER_MODULES, TRITON_CACHE)
# Families an installed aiter needs whether or not another arch's code is there.
AITER_NEEDS = (AITER_ASM,)


@dataclass(frozen=True)
class Verdict:
    name: str
    status: str  # OK, PRESENT or INFO
    line: str


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def judge(m: dict[str, Any], target: str, needs: tuple[str, ...] = ()) -> list[Verdict]:
    """needs: families the image's runtime loads (AITER_NEEDS where aiter is installed): none of them is PRESENT."""
    out = [_family(name, m["families"].get(name) or {}, target, name in needs) for name in FAMILIES]
    out += [Verdict("misplaced", PRESENT, f"{x['path']} is {x['arch']} code in a folder named {x['folder_arch']}")
            for x in m["misplaced"][:5]]
    if len(m["misplaced"]) > 5:
        out.append(Verdict("misplaced", PRESENT, f"... and {len(m['misplaced']) - 5} more misplaced code objects"))
    out.append(_elsewhere(m, target))
    if m["unknown"]:
        first = m["unknown"][0]
        out.append(Verdict("unknown", INFO, f"{len(m['unknown'])} files could not be read as GPU code, e.g. "
                                            f"{first['path']}: {first['why']}"))
    return out


def _family(name: str, archs: dict[str, dict[str, int]], target: str, needed: bool = False) -> Verdict:
    if not archs:
        if needed:
            return Verdict(name, PRESENT, f"{name}: none for {target} (none at all) where the runtime needs them: "
                                          "its loader finds no kernel for the arch, a 'prebuilt' image with zero kernels")
        return Verdict(name, OK, f"{name}: none in this image")
    mine = archs.get(target)
    others = {a: c for a, c in archs.items() if a != target}
    listed = ", ".join(f"{a} {c['files']} files {mib(c['bytes'])}" for a, c in sorted(others.items()))
    if mine is None:
        return Verdict(name, PRESENT, f"{name}: code for {', '.join(sorted(others))} ({listed}) but none for "
                                      f"{target}: its first call fails or compiles at run time")
    have = f"{name}: {target} {mine['files']} files {mib(mine['bytes'])}"
    if others and name in BY_FOLDER:
        return Verdict(name, PRESENT, f"{have}, and another arch's beside it where the loader picks by arch: "
                                      f"{listed}")
    return Verdict(name, OK, have + (f" (multi-arch bundles also hold {listed})" if others else ""))


def _elsewhere(m: dict[str, Any], target: str) -> Verdict:
    """Everything outside the checked families, by arch: ours and the base image's, named-only included."""
    rows = []
    for arch, row in m["archs"].items():
        rows.append(f"{arch} {mib(row['ours_bytes'])} ours, {mib(row['base_bytes'])} base"
                    + (f" ({row['named_only_files']} named-only)" if row["named_only_files"] else ""))
    return Verdict("by-arch", INFO, "all GPU code by arch: " + ("; ".join(rows) or "none")
                   + f" (target {target})")


def status(verdicts: list[Verdict]) -> str:
    return PRESENT if any(v.status == PRESENT for v in verdicts) else OK
