"""python -m validation.audit --arch X|auto --json-file OUT [--model DIR|PRESET --tp N ...] [--untuned-csv PATH]

Exit codes: 0 nothing PRESENT, 1 a pitfall is PRESENT, 2 bad input. The JSON report is the host's input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from validation.core.usage import USAGE_ERROR, Parser, UsageError


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m validation.audit", description="Audit this image for known ATOM/aiter pitfalls.")
    p.add_argument("--arch", required=True, choices=["gfx942", "gfx950", "auto"], help="the arch the image must serve")
    p.add_argument("--json-file", type=Path, metavar="OUT", help="write the report here (default: stdout)")
    p.add_argument("--model", help="config.json folder or preset, for the tuned-CSV coverage")
    p.add_argument("--tp", type=int, nargs="+", default=[1], metavar="N", help="tensor-parallel sizes")
    p.add_argument("--untuned-csv", type=Path, metavar="PATH", help="write the model's untuned shapes here")
    return p


def main(argv: list[str] | None = None) -> int:
    from validation.core.outputs import WRITE_FAILED, check_output, write_output
    from validation.probes.runner import audit, image_context

    try:
        args = build_parser().parse_args(argv)
        if any(tp < 1 for tp in args.tp):
            raise UsageError(f"--tp must be >= 1, got {args.tp}")
        for flag, path in (("--json-file", args.json_file), ("--untuned-csv", args.untuned_csv)):
            if path is not None:
                check_output(path, flag)  # before the audit runs
    except (UsageError, ValueError) as exc:
        print(f"python -m validation.audit: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    report = audit(image_context(args.arch, args.model, tuple(args.tp), args.untuned_csv))
    text = json.dumps(report, indent=1, default=str) + "\n"
    if args.json_file:
        failed = write_output(args.json_file, text, "--json-file")
        if failed:
            print(f"python -m validation.audit: error: {failed}", file=sys.stderr)
            return WRITE_FAILED
        if args.json_file.is_file():  # never a device (/dev/null)
            args.json_file.chmod(0o644)  # the host user reads it, whoever the container ran as
    else:
        sys.stdout.write(text)
    for f in report["findings"]:
        print(f"{f['status']:<8} {f['id']:<20} {(f['evidence'] or [''])[0][:110]}", file=sys.stderr)
    return 1 if report["present"] else 0


if __name__ == "__main__":
    sys.exit(main())
