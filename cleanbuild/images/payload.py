"""The report's payload section: the clean image's GPU code by arch (its own /opt/atom-build/payload.json, written by
validation.payload in the clean step), what that step left out, and the verdicts audit and validation give. Pure."""

from __future__ import annotations

from typing import Any

from validation.gpucode import judge

TOP_OWNERS = 6
EXAMPLES = 5


def section(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """None for an image built before the payload manifest existed."""
    if not payload:
        return None
    m, left = payload["manifest"], payload.get("left_out") or {}
    target = m.get("target")
    archs = {a: {**{k: r[k] for k in ("files", "bytes", "named_only_files", "named_only_bytes", "ours_bytes",
                                     "base_bytes")},
                 "owners": sorted(r["owners"].items(), key=lambda kv: -kv[1]["bytes"])[:TOP_OWNERS]}
             for a, r in m["archs"].items()}
    # Every image built here installs aiter: its loader needs the arch's assembly kernels.
    verdicts = judge.judge(m, target, judge.AITER_NEEDS) if target else []
    return {"target": target, "roots": m.get("roots", []), "archs": archs, "families": m["families"],
            "left_out_roots": left.get("roots", []), "left_out_by_arch": left.get("left_out_by_arch", {}),
            "kept_by_arch": left.get("kept_by_arch", {}),
            "left_out_examples": [x["path"] for x in (left.get("left_out") or [])[:EXAMPLES]],
            "misplaced": m["misplaced"], "unknown": m["unknown"], "files_read": m.get("files_read"),
            "status": judge.status(verdicts) if verdicts else "unknown",
            "verdicts": [{"name": v.name, "status": v.status, "line": v.line} for v in verdicts]}


def markdown(p: dict[str, Any] | None) -> list[str]:
    if not p:
        return ["", "## GPU code (payload)", "", "- not read: the image has no /opt/atom-build/payload.json"]
    out = ["", "## GPU code (payload)", "", f"- target {p['target']}: {p['status']} ({p['files_read']} files read "
                                            f"under {', '.join(p['roots'])})", "",
           "| arch | code objects | bytes | ours | base image | named-only files |", "| --- | --- | --- | --- | --- | --- |"]
    out += [f"| {a} | {r['files']} | {r['bytes']} | {r['ours_bytes']} | {r['base_bytes']} | {r['named_only_files']} |"
            for a, r in p["archs"].items()]
    out.append("")
    out += [f"- left out by the clean step ({', '.join(p['left_out_roots'])}): {a} {r['files']} code objects, "
            f"{r['bytes']} bytes" for a, r in sorted(p["left_out_by_arch"].items())] or ["- left out: nothing"]
    out += [f"- {v['status']}: {v['line']}" for v in p["verdicts"]]
    out += [f"- unknown: {u['path']}: {u['why']}" for u in p["unknown"][:10]]
    return out
