"""A bisection's result three ways, from one dict: lines for people, JSON (--json, bisect.json), Markdown
(bisect.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cleanbuild.bisect.search import Outcome
from cleanbuild.core.atomic import replace_all

WHERE = {True: ", each in the commit's image (--image)", False: ", each on the commit's source tree"}


def to_dict(outcome: Outcome) -> dict[str, Any]:
    span, first = outcome.range, outcome.first_bad
    return {
        "component": span.component, "exit_code": outcome.exit_code, "summary": outcome.summary,
        "good": span.good.__dict__, "bad": span.bad.__dict__, "commits": span.commits,
        "first_parent": span.first_parent, "checks": [c.label for c in outcome.checks],
        "steps_build_images": outcome.image,
        "first_bad": None if first is None else {**first.__dict__, "pull_request": outcome.pull_request},
        "at_first_bad": outcome.at_first_bad, "at_parent": outcome.at_parent,
        "steps": [{"sha": s.sha, "verdict": s.verdict, "seconds": s.seconds,
                   "lines": [f.line for f in s.findings if f.state != "good"]} for s in outcome.steps],
        "check_runs": len(outcome.steps), "seconds": round(sum(s.seconds for s in outcome.steps), 2),
    }


def lines(data: dict[str, Any]) -> list[str]:
    first = data["first_bad"]
    out = [f"bisect {data['component']}: {data['commits']} commit(s) in {data['good']['sha'][:12]}.."
           f"{data['bad']['sha'][:12]} ({'first-parent' if data['first_parent'] else 'all parents'}); "
           f"checks: {', '.join(data['checks'])}{WHERE[data['steps_build_images']]}"]
    if first:
        pr = f" (pull request #{first['pull_request']})" if first["pull_request"] else ""
        out += [f"first bad commit: {first['sha']}", f"  date:    {first['date']}",
                f"  subject: {first['subject']}{pr}"]
        out += [f"  at it:      {line}" for line in data["at_first_bad"]]
        out += [f"  at parent:  {line}" for line in data["at_parent"]]
    else:
        out.append(data["summary"])
    out.append(f"steps: {data['check_runs']} check runs, {data['seconds']:.1f} s")
    out += [f"  {s['sha'][:12]} {s['verdict']:<10} {s['seconds']:6.1f} s  {(s['lines'] or [''])[0]}"
            for s in data["steps"]]
    return out


def markdown(data: dict[str, Any]) -> str:
    first = data["first_bad"]
    head = [f"# bisect {data['component']}", "", f"- range: `{data['good']['sha']}..{data['bad']['sha']}` "
            f"({data['commits']} commits, {'first-parent' if data['first_parent'] else 'all parents'})",
            f"- checks: {', '.join(f'`{c}`' for c in data['checks'])}{WHERE[data['steps_build_images']]}",
            f"- result: {data['summary']}"]
    if first:
        pr = f" (#{first['pull_request']})" if first["pull_request"] else ""
        head += [f"- first bad commit: `{first['sha']}` {first['date']}{pr}", f"  - subject: {first['subject']}"]
        head += [f"  - at it: `{line}`" for line in data["at_first_bad"]]
        head += [f"  - at its parent: `{line}`" for line in data["at_parent"]]
    rows = ["", "| commit | verdict | seconds | first line not good |", "| --- | --- | --- | --- |"]
    rows += [f"| `{s['sha'][:12]}` | {s['verdict']} | {s['seconds']:.1f} | {(s['lines'] or [''])[0]} |"
             for s in data["steps"]]
    return "\n".join(head + rows) + "\n"


def write(data: dict[str, Any], folder: Path) -> list[Path]:
    files = {folder / "bisect.json": json.dumps(data, indent=2) + "\n", folder / "bisect.md": markdown(data)}
    folder.mkdir(parents=True, exist_ok=True)
    replace_all(files)
    return list(files)


def render(data: dict[str, Any], *, as_json: bool) -> None:
    print(json.dumps(data, indent=2) if as_json else "\n".join(lines(data)))
