"""`invoke bisect`: inputs checked at the edge, the search over the bisect layer (cleanbuild.bisect), the report;
returns the exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cleanbuild.bisect import checks as checking
from cleanbuild.bisect import imagestep, report
from cleanbuild.bisect.search import bisect
from cleanbuild.core import engine
from cleanbuild.core.errors import UsageError
from cleanbuild.core.outputs import output_folder
from cleanbuild.request.build import Request


def bisect_command(request: Request, component: str, good: str | None, bad: str | None, names: tuple[str, ...], *,
                   as_json: bool = False, report_dir: Path | None = None, first_parent: bool = True,
                   image: bool = False) -> int:
    """0 found, 1 every commit good (or no commit, or undecided); errors raise (2, 3, 130)."""
    if not good or not bad:
        raise UsageError("bisect failed because it needs both ends of the range. To fix, pass --good REF and --bad REF.")
    comp = checking.component(component)
    chosen = checking.parse(comp, names, image)
    if report_dir is not None:
        output_folder(report_dir, "--report")  # the one output check (cleanbuild.core.outputs), before any step
    archs = request.arch
    if len(archs) > 1:
        raise UsageError("bisect --arch failed because it takes one arch. To fix, pass --arch gfx942 or gfx950.")
    if not archs and any(c.kind == checking.VALIDATION for c in chosen):
        raise UsageError(f"bisect failed because the validation checks ({', '.join(c.name for c in chosen if c.kind == checking.VALIDATION)}) "
                         "need the arch they validate. To fix, pass --arch gfx942 or gfx950 (or --check only "
                         "patch:<name> and import).")
    setup = imagestep.Setup(request, archs[0]) if image else None
    if image:
        engine.client()  # no engine: exit 3 now, before the first step
    outcome = bisect(request.profile, comp, good, bad, chosen, arch=archs[0].value if archs else None,
                     device=request.device, first_parent=first_parent, image=setup)
    data = report.to_dict(outcome)
    if report_dir is not None:
        report.write(data, report_dir)
        print(f"report: {report_dir}/bisect.json, bisect.md", file=sys.stderr)
    report.render(data, as_json=as_json)
    return outcome.exit_code
