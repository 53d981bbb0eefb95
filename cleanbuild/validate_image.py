"""`nox -s validate -- --image TAG`: run validation/ inside a built image and copy its JSON report out."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from . import engine
from .arch import Arch
from .errors import CleanBuildError, UsageError
from .plan import REPO_ROOT, validation_run
from .settings import new_run_id


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nox -s validate --", description=__doc__)
    p.add_argument("--image", required=True, help="image (tag or ID) to validate")
    p.add_argument("--arch", help="gfx942|gfx950 (default: the image's io.atom-build.arch label)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda needs /dev/kfd and /dev/dri")
    p.add_argument("--json", type=Path, default=None, help="where to copy the report (default reports/validate-<id>.json)")
    p.add_argument("--debug", action="store_true")
    p.add_argument("rest", nargs="*", help="passed to python -m validation (e.g. --only gemm-triton)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        return validate(args)
    except CleanBuildError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def validate(args: argparse.Namespace) -> int:
    cli = engine.client()
    if engine.image_id(cli, args.image) is None:
        raise UsageError(f"image {args.image} not found. To fix, build it (invoke build-clean) or pass an existing tag.")
    arch = args.arch or (engine.inspect(cli, args.image).get("Config", {}).get("Labels") or {}).get("io.atom-build.arch")
    if not arch:
        raise UsageError(f"{args.image} has no io.atom-build.arch label. To fix, pass --arch gfx942|gfx950.")
    run_id = new_run_id()
    out_dir = REPO_ROOT / ".cache" / "runs" / run_id
    env = {"TRITON_INTERPRET": "1"} if args.device == "cpu" else {}
    spec = validation_run(REPO_ROOT, Arch.parse(arch).value, args.device, run_id, out_dir, env, tuple(args.rest))
    result = engine.run_container(cli, args.image, spec)
    print(result.logs)
    report = out_dir / "validation.json"
    if not report.is_file():
        print(f"error: validation wrote no report (exit {result.exit_code})", file=sys.stderr)
        return 1
    dest = args.json or REPO_ROOT / "reports" / f"validate-{run_id}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report, dest)
    data = json.loads(report.read_text())
    print(f"report: {dest} (exit {data.get('exit_code', result.exit_code)})")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
