"""python -m validation.route --model M [--ck-mode ckfree|ck] [--allow-unservable] [--json-file OUT]

Prints each layer's route (ATOM op, the aiter function, the kernels, present or not). Exit 1 when a CK-free route
needs a module the image lacks (naming the layer, op and module) unless --allow-unservable; exit 2 on bad input;
exit 3 when the image has no ATOM or aiter to read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from validation.routing import layers as routes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.route", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a preset or a config.json (or its folder)")
    p.add_argument("--ck-mode", choices=("ckfree", "ck"), default=os.environ.get("ATOM_BUILD_CK_MODE", "ck"))
    p.add_argument("--allow-unservable", action="store_true", help="report a route that needs a missing module, "
                   "exit 0")
    p.add_argument("--json-file", type=Path)
    args = p.parse_args(argv)
    try:
        route = routes.for_image(args.model, args.ck_mode)
    except ValueError as e:
        print(f"route: {e}", file=sys.stderr)
        return 2
    except LookupError as e:
        print(f"route: {e}; run it in the image (python -m validation.route)", file=sys.stderr)
        return 3
    out = route.to_json() | {"allowed_unservable": bool(args.allow_unservable and route.unservable)}
    if args.json_file:
        args.json_file.write_text(json.dumps(out, indent=1) + "\n")
    print(routes.table(route))
    if route.unservable:
        print(f"route: {routes.refusal(route)}", file=sys.stderr)
        return 0 if args.allow_unservable else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
