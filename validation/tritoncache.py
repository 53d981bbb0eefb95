"""python -m validation.tritoncache warm|check --arch X --ck-mode M [--model M ...] [--tp N ...] [--cache DIR]

warm: compile the image's Triton kernels for its arch and models into the cache (TRITON_CACHE_DIR, or --cache),
with no GPU, and write the manifest (--manifest, default /opt/atom-build/triton-cache.json). Exit 1 when a kernel
does not compile for the arch (it would fail at first request), naming it.
check: replay the same calls reading the cache only (the manifest's models and sizes when there is one) and exit 1
naming every kernel that would compile at first use. Exit 2: bad input, in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from validation.core.archs import ARCHS, CK_MODES
from validation.core.usage import USAGE_ERROR, Parser, UsageError

PROG = "python -m validation.tritoncache"
RUN_FACTS = ("seconds", "jobs", "kernels_compiled")  # this build's, not the image's: kept out of the manifest
RUN_LINE = "atom-build-warm-run:"


def build_parser() -> argparse.ArgumentParser:
    from validation.core.models import PRESETS

    p = Parser(prog=PROG, description="The image's Triton cache: compiled ahead, and proven.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, text in (("warm", "compile the image's Triton kernels into the cache"),
                       ("check", "replay the calls and list every kernel that is not a cache hit")):
        s = sub.add_parser(name, help=text)
        s.add_argument("--arch", required=True, choices=sorted(ARCHS))
        s.add_argument("--ck-mode", required=True, choices=CK_MODES)
        s.add_argument("--model", action="append", default=[], metavar="MODEL",
                       help=f"a preset ({', '.join(PRESETS)}) or a config.json (repeatable)")
        s.add_argument("--tp", type=int, nargs="+", default=None, metavar="N", help="tensor-parallel sizes (default 8)")
        s.add_argument("--target", help="compile for: hip:<arch> (the default) or cuda:<capability> (e.g. cuda:90)")
        s.add_argument("--cache", type=Path, help="the Triton cache folder (default: TRITON_CACHE_DIR)")
        s.add_argument("--manifest", type=Path, default=None, help="the manifest (default /opt/atom-build/triton-cache.json)")
        s.add_argument("--aiter-src", metavar="DIR", help="an aiter package folder (default: the installed aiter)")
        s.add_argument("--json-file", type=Path, metavar="OUT", help="also write the result here")
    sub.choices["warm"].add_argument("--jobs", type=int, default=None,
                                     help="processes that compile at once (default: the idle CPUs now, at most one per "
                                          "GiB available; 1 below 4 CPUs)")
    sub.choices["warm"].add_argument("--reuse", type=Path, metavar="DIR",
                                     help="this machine's Triton cache: kernels found there are copied, not compiled, "
                                          "and what is compiled is added (the build's cache mount)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        req, warmed = _request(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    return _warm(req, args) if args.command == "warm" else _check(req, warmed, args)


def _request(args):
    from validation.aiterpkg import locate
    from validation.warmcache import manifest
    from validation.warmcache.cache import MANIFEST, Request

    args.manifest = args.manifest or MANIFEST
    jobs = _jobs(args)
    warmed = manifest.load(args.manifest) if args.command == "check" else None
    model_list = args.model or (warmed or {}).get("models") or []
    if args.command == "warm" and not model_list:
        raise UsageError("no model to warm for: give --model PRESET|CONFIG.json")
    tp = tuple(args.tp or (warmed or {}).get("tp") or [8])
    for model in model_list:  # before anything is imported or compiled: a size the model runs at, at least
        _plannable(model, tp)
    cache = args.cache or (Path(os.environ["TRITON_CACHE_DIR"]) if os.environ.get("TRITON_CACHE_DIR") else None)
    if cache is None:
        raise UsageError("no cache folder: give --cache DIR or set TRITON_CACHE_DIR")
    if args.command == "warm":
        _writable(cache)
        if args.reuse is not None:
            _writable(args.reuse, "--reuse", "the warm step takes kernels from it and adds what it compiles")
    root = locate.aiter_root(args.aiter_src)
    if root is None or not (root / "ops" / "triton").is_dir():
        raise UsageError(f"no aiter with Triton kernels {'at ' + args.aiter_src if args.aiter_src else 'installed'}")
    target = args.target or f"hip:{args.arch}"
    reuse = getattr(args, "reuse", None)
    return Request(args.arch, args.ck_mode, tuple(model_list), tp, target, cache.resolve(), root,
                   ARCHS[args.arch].default_cu_num, jobs, reuse.resolve() if reuse else None), warmed


def _jobs(args) -> int:
    if args.command != "warm":
        return 1
    if args.jobs is None:
        from validation.warmcache.jobs import default_jobs

        return default_jobs()
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give a number of processes, 1 or more")
    return args.jobs


def _plannable(model: str, tp: tuple[int, ...]) -> None:
    """UsageError when the model's config cannot be read, or when no tensor-parallel size splits it (a size that
    does not is left out of the plan: validation.warmcache.plan)."""
    from validation.core import models

    why = []
    try:
        _, cfg = models.load_config(model)
        for size in tp:
            try:
                models.gemm_shapes(cfg, size)
                models.expert_shape(cfg, size)
                return
            except ValueError as exc:
                why.append(str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        why.append(f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc))
    raise UsageError(f"--model {model}: its shapes cannot be planned at tp {list(tp)} ({'; '.join(why)})")


def _writable(folder: Path, flag: str = "--cache", why: str = "the warm step writes the cache there") -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{flag} {folder} cannot be written ({exc.strerror}); {why}: point it at a writable "
                         "folder") from None


def _warm(req, args) -> int:
    from validation.warmcache import cache, manifest

    result = cache.warm(req)
    if result["failures"]:
        for line in result["failures"]:
            print(f"{PROG} warm: does not compile for {req.target}: {line}", file=sys.stderr)
        return 1
    # The manifest is part of the image: what this machine took to make it (seconds, processes) is not.
    manifest.write(args.manifest, {k: v for k, v in result.items() if k not in RUN_FACTS})
    manifest.open_to_all(req.cache)
    _out(args.json_file, result)
    stubs = result["stubs"]
    print(f"{PROG} warm: {result['kernels']} kernels for {req.target} ({len(result['kinds'])} kinds, "
          f"{result['kernels_compiled']} compiled here) from "
          f"{result['calls']} calls of {', '.join(req.models)} tp {list(req.tp)}, "
          f"{result['cache']['bytes'] / 2**20:.1f} MiB, {result['seconds']['total']} s; launchers: "
          f"{stubs['launchers'] or stubs['error'] or stubs['not_made']}", file=sys.stderr)
    # One line the host reads from the build log for its report (cleanbuild.images.steps): the run's own facts.
    print(f"{RUN_LINE} {json.dumps({k: result[k] for k in RUN_FACTS}, sort_keys=True)}", file=sys.stderr)
    return 0


def _check(req, warmed, args) -> int:
    from validation.warmcache import cache

    result = cache.check(req, warmed)
    failed = result["compiled_at_first_use"] or result["launch_path"].startswith("FAILED")
    result["why"] = cache.mismatch(warmed, result) if failed else []
    _out(args.json_file, result)
    missed = result["compiled_at_first_use"]
    print(f"{PROG} check: {len(missed)} of {result['kernels']} kernels compile at first use"
          + (f": {', '.join(missed[:10])}" + (" ..." if len(missed) > 10 else "") if missed else "")
          + "".join(f"; {w}" for w in result["why"]) + f"; launch path: {result['launch_path']}", file=sys.stderr)
    return 1 if missed or result["failures"] or result["launch_path"].startswith("FAILED") else 0


def _out(path: Path | None, data: dict) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # No exit hooks: aiter's source defines the op aiter::aiter::gemm_a16w16_, which torch's own exit hook fails to
    # remove (a traceback after the result: tests/support/exit_hooks.py).
    os._exit(code)
