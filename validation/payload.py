"""python -m validation.payload scan PATH... [--arch X] [--root DIR] [--json-file OUT]
   python -m validation.payload prune --site DIR --arch X --json-file OUT

scan: the payload manifest of the GPU code under each PATH (exit 0; 1 when a folder named for one arch holds another
arch's code). prune: the clean step's removal of other archs' folders under arch-keyed roots (aiter_meta/hsa),
writing what it left out (exit 1 when the target arch has no folder there). Exit 2: bad input. Audit and validation
judge a manifest for an arch (validation.gpucode.judge); this command only reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from validation.core.archs import ARCHS
from validation.core.usage import USAGE_ERROR, Parser, UsageError


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m validation.payload", description="The GPU code in a tree, read from its bytes.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    s = sub.add_parser("scan", help="write the payload manifest of PATHs")
    s.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    s.add_argument("--arch", choices=sorted(ARCHS), help="the arch the tree must serve")
    s.add_argument("--root", type=Path, default=Path("/"), help="the tree's / (paths are shown relative to it)")
    s.add_argument("--json-file", type=Path, metavar="OUT", help="write the manifest here (default: stdout)")
    r = sub.add_parser("prune", help="leave out other archs' code under arch-keyed folders of a site-packages")
    r.add_argument("--site", type=Path, required=True, help="the site-packages folder")
    r.add_argument("--arch", required=True, choices=sorted(ARCHS))
    r.add_argument("--json-file", type=Path, required=True, metavar="OUT", help="write what was left out here")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        given = args.paths if args.command == "scan" else [args.site]
        missing = [str(p) for p in given if not p.exists()]
        if missing:
            raise UsageError(f"{', '.join(missing)} does not exist")
    except UsageError as exc:
        print(f"python -m validation.payload: error: {exc}. To fix, see --help", file=sys.stderr)
        return USAGE_ERROR
    return _prune(args) if args.command == "prune" else _scan(args)


def _scan(args: argparse.Namespace) -> int:
    from validation.gpucode.scan import manifest, scan

    roots = [p if p.is_absolute() else Path.cwd() / p for p in args.paths]
    result = manifest(scan(roots, root=args.root), target=args.arch, roots=[str(p) for p in args.paths])
    _write(args.json_file, result)
    for arch, row in result["archs"].items():
        print(f"{arch:<14} {row['files']:>6} code objects {row['bytes'] / 2**20:9.1f} MiB"
              + (f"  +{row['named_only_files']} named-only" if row["named_only_files"] else ""), file=sys.stderr)
    for u in result["unknown"]:
        print(f"unknown        {u['path']}: {u['why']}", file=sys.stderr)
    return 1 if result["misplaced"] else 0


def _prune(args: argparse.Namespace) -> int:
    from validation.gpucode.prune import PruneError, prune

    try:
        record = prune(args.site, args.arch)
    except PruneError as exc:
        print(f"python -m validation.payload prune: error: {exc}", file=sys.stderr)
        return 1
    _write(args.json_file, record)
    for arch, row in sorted(record["left_out_by_arch"].items()):
        print(f"left out {arch}: {row['files']} code objects, {row['bytes']} bytes", file=sys.stderr)
    return 0


def _write(out: Path | None, data: dict) -> None:
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
