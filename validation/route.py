"""python -m validation.route --model M [--ck-mode ckfree|ck] [--allow-unservable] [--json-file OUT]

Prints each layer's route (ATOM op, the aiter function, the kernels, present or not). Exit 1 when a CK-free route
needs a module the image lacks (naming the layer, op and module) unless --allow-unservable; exit 2 on bad input;
exit 3 when the image has no ATOM or aiter to read.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

from validation.core import models
from validation.routing import layers as routes
from validation.warmcache import plan as warmplan

HELP = {
    # What each switch would move, read from ATOM at its pin (181b0f46); printed beside a refusal when it applies.
    "module_moe_ck2stages": "no ATOM switch moves bf16 experts off aiter's CK 2-stage MoE at this pin",
    "module_moe_asm": "no ATOM switch moves the router's topk_softmax off module_moe_asm at this pin",
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.route", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a preset or a config.json (or its folder)")
    p.add_argument("--ck-mode", choices=("ckfree", "ck"), default=os.environ.get("ATOM_BUILD_CK_MODE", "ck"))
    p.add_argument("--allow-unservable", action="store_true", help="report a route that needs a missing module, "
                   "exit 0")
    p.add_argument("--json-file", type=Path)
    args = p.parse_args(argv)
    try:
        name, cfg = models.load_config(args.model)
    except ValueError as e:
        print(f"route: {e}", file=sys.stderr)
        return 2
    roots = routes.packages()
    if set(roots) != {"atom", "aiter"}:
        print(f"route: this Python has no {' or '.join({'atom', 'aiter'} - set(roots))} to read; run it in the "
              "image (python -m validation.route)", file=sys.stderr)
        return 3
    try:
        route = routes.make(str(name), cfg, warmplan.quantization(cfg), args.ck_mode, roots, dict(os.environ),
                            importlib.util.find_spec("flydsl") is not None)
    except ValueError as e:
        print(f"route: {e}", file=sys.stderr)
        return 2
    out = route.to_json() | {"allowed_unservable": bool(args.allow_unservable and route.unservable)}
    if args.json_file:
        args.json_file.write_text(json.dumps(out, indent=1) + "\n")
    print(table(route))
    if route.unservable:
        print(refusal(route), file=sys.stderr)
        return 0 if args.allow_unservable else 1
    return 0


def table(route: routes.Route) -> str:
    lines = [f"route of {route.model} ({route.arch_class}), {route.ck_mode}; {route.unresolved} calls not followed"]
    for layer in route.layers:
        kernels = ", ".join(sorted({f"{k.kind}:{k.module or k.name.rsplit('.', 1)[-1]}{'' if k.present else ' MISSING'}"
                                    for k in layer.kernels}))
        lines.append(f"  {layer.layer or '-'} [{layer.op or '-'}]: {kernels}")
    return "\n".join(lines)


def refusal(route: routes.Route) -> str:
    missing = route.to_json()["missing"]
    first = missing[0]
    hint = HELP.get(first["module"], "no ATOM switch or patch of this repo moves it")
    return (f"route: a {route.ck_mode} image cannot serve {route.model}: {len(route.unservable)} layers need modules "
            f"it lacks, first {first['layer']} ({first['op'] or 'ATOM'}) -> {first['entry'] or '?'} -> "
            f"{first['module']} ({hint}); --allow-unservable reports it and exits 0")


if __name__ == "__main__":
    sys.exit(main())
