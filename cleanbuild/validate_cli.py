"""`nox -s validate -- --image TAG ...`: build-clean's validate step, on any image (cleanbuild.commands.validate)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .boundary import guarded
from .commands import validate
from .outputs import output_file
from .settings import Request, resolve, site_file
from .spec import REPO_ROOT


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    cut = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(prog="nox -s validate --", description=__doc__)
    p.add_argument("--image", required=True, help="image (tag or ID) to validate")
    p.add_argument("--arch", help="gfx942|gfx950 (default: the image's io.atom-build.arch label)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda needs a ROCm host (/dev/kfd)")
    p.add_argument("--gpu", help="GPU indices, e.g. 0 or 0,1 (default: all)")
    p.add_argument("--user-id", "--user", dest="user", help="run the container as UID[:GID] (numeric)")
    p.add_argument("--json", type=Path, default=None, help="where to copy the report (default reports/validate-<run>.json)")
    p.add_argument("--debug", action="store_true")
    return p.parse_args(argv[:cut]), argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    """argparse's usage errors exit 2 on their own; everything after parsing goes through the one boundary."""
    args, rest = parse(sys.argv[1:] if argv is None else argv)
    return guarded(lambda: validate(args.image, _request(args), rest=tuple(rest),
                                    dest=output_file(args.json, "--json") if args.json else None),
                   debug=args.debug, report=lambda error: print(f"error: {error}", file=sys.stderr))


def _request(args: argparse.Namespace) -> Request:
    """The flags by the names the invoke tasks give them (so a message names --user-id), with invoke.yaml."""
    flags = {"arch": args.arch, "device": args.device, "gpu": args.gpu, "user_id": args.user}
    return resolve(flags, site_file(REPO_ROOT / "invoke.yaml"))


if __name__ == "__main__":
    sys.exit(main())
