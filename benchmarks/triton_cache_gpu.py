"""The Triton cache on a real GPU (issue 55), run on the NVIDIA H200 the device tool lends:

1. warm, with no GPU visible (CUDA_VISIBLE_DEVICES empty): `python -m validation.tritoncache warm --target cuda:90`,
   the stand-in driver answering Triton's target question; it also makes Triton's CUDA driver module and one
   launcher per kernel signature (C, compiled) into the same cache;
2. the same calls launched on the GPU (aiter's own entry points, aiter's gfx950 configs, AMD-only launch options
   dropped), each in a fresh process: cold (an empty cache) and warm (a copy of the warmed one, Triton's C builds
   refused, as in an image with no compiler), in alternating rounds; every kernel event from Triton's listener.

The ROCm target differs only in the target string (hip:gfx950, warp 64). Prints and writes one JSON document:

    python benchmarks/triton_cache_gpu.py --aiter-src PKG --atom-src DIR --out FILE [--rounds 2] [--model M ...]
    python benchmarks/triton_cache_gpu.py --record FILE     # here: its row in results.json (then render.py --write)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARCH, TARGET = "gfx950", "cuda:90"


def warm(args, cache: Path) -> dict:
    out = cache.with_suffix(".json")
    argv = [sys.executable, "-m", "validation.tritoncache", "warm", "--arch", ARCH, "--ck-mode", "ckfree",
            *[a for m in args.model for a in ("--model", m)], "--tp", *map(str, args.tp), "--target", TARGET,
            "--cache", str(cache), "--manifest", str(cache.with_suffix(".manifest.json")), "--json-file", str(out),
            "--aiter-src", str(args.aiter_src)]
    env = {**_env(args), "CUDA_VISIBLE_DEVICES": "", "TRITON_STORE_BINARY_ONLY": "1"}
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"warm failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(out.read_text())
    return {"wall_s": round(wall, 2), "kernels": result["kernels"], "calls": result["calls"],
            "cache_bytes": result["cache"]["bytes"], "by_arch": result["cache"]["by_arch"], "stubs": result["stubs"],
            "seconds": result["seconds"], "jobs": result["jobs"]}


def _env(args) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(args.atom_src)])
    return env


def launch(args, cache: Path, no_compiler: bool) -> dict:
    """One fresh process that makes every call on the GPU against cache."""
    argv = [sys.executable, __file__, "--launch", str(cache), "--aiter-src", str(args.aiter_src), "--atom-src",
            str(args.atom_src), *[a for m in args.model for a in ("--model", m)], "--tp", *map(str, args.tp)]
    argv += ["--no-compiler"] if no_compiler else []
    env = _env(args)
    if no_compiler:  # no C compiler Triton could find (its C builds also refused in-process)
        env = {k: v for k, v in env.items() if k not in ("CC", "CXX")}
        env["PATH"] = str(_path_without_compilers(env.get("PATH", ""), cache.parent / "no-compiler-path"))
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": f"exit {proc.returncode}: {proc.stderr[-3000:]}", "seconds": None}
    return {**json.loads(proc.stdout.splitlines()[-1]), "process_s": round(time.perf_counter() - start, 2)}


COMPILERS = ("cc", "c++", "cpp", "gcc", "g++", "clang", "clang++")


def _path_without_compilers(path: str, into: Path) -> Path:
    """A folder of links to every program on PATH but the C compilers Triton looks for (CC, gcc, clang). Not an
    empty PATH: Triton's key for its C modules holds platform.architecture(), which asks `file` (absent, the key
    changes and every cached launcher is missed)."""
    into.mkdir(exist_ok=True)
    for folder in reversed([Path(p) for p in path.split(os.pathsep) if p]):
        for prog in folder.glob("*") if folder.is_dir() else []:
            name = prog.name
            if name in COMPILERS or name.startswith(tuple(f"{c}-" for c in COMPILERS)) or "-linux-gnu-" in name:
                continue
            link = into / name
            link.unlink(missing_ok=True)
            link.symlink_to(prog)
    return into


def _launch_here(args) -> None:
    """(in the fresh process) every planned call on the GPU, timed; Triton's listener on."""
    import contextlib

    import torch

    from validation.warmcache import cache, hooks, replay

    os.environ["TRITON_CACHE_DIR"] = str(args.launch)
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()  # the CUDA context before the clock
    req = cache.Request(ARCH, "ckfree", tuple(args.model), tuple(args.tp), TARGET, Path(args.launch),
                        Path(args.aiter_src), 256)
    replay.open_aiter(req.aiter_pkg, ARCH)
    calls = sorted({c for p in cache.make_plans(req) for c in p.calls})
    guard = hooks.no_compiler() if args.no_compiler else contextlib.nullcontext()
    with guard:
        done = replay.replay(calls, ARCH, hooks.Target.parse(TARGET), device="cuda")
    per_entry: dict[str, float] = {}
    first: dict[str, float] = {}
    for call, seconds, events in zip(calls, done.seconds, done.per_call, strict=True):
        per_entry[call.entry] = per_entry.get(call.entry, 0.0) + seconds
        for event in events:
            first.setdefault(event.kernel, 0.0)
            first[event.kernel] += seconds / max(1, len(events))
    print(json.dumps({"calls": len(calls), "seconds": round(sum(done.seconds), 3),
                      "per_entry": {k: round(v, 3) for k, v in sorted(per_entry.items())},
                      "per_kernel": {k: round(v, 3) for k, v in sorted(first.items())},
                      "kernels": len({e.hash for e in done.events}),
                      "misses": sorted({f"{e.kernel} {e.hash[:12]}" for e in done.events if not e.cache_hit}),
                      "hits": len({e.hash for e in done.events if e.cache_hit}), "failures": done.failures,
                      "c_compiler": {c: shutil.which(c) for c in COMPILERS} | {"CC": os.environ.get("CC")},
                      "triton_platform_key": __import__("triton.runtime.build").runtime.build.platform_key(),
                      "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "triton": __import__("triton").__version__}))
    sys.stdout.flush()
    os._exit(0)  # aiter's op aiter::aiter::gemm_a16w16_ fails torch's exit hook (validation/tritoncache.py)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--aiter-src", type=Path)
    p.add_argument("--atom-src", type=Path)
    p.add_argument("--model", action="append", default=[])
    p.add_argument("--tp", type=int, nargs="+", default=[8])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--modes", default="cold,warm", help="the launches of a round, in order (cold, warm)")
    p.add_argument("--out", type=Path)
    p.add_argument("--launch", help=argparse.SUPPRESS)
    p.add_argument("--no-compiler", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--record", type=Path, help="write FILE's result as the triton_cache_gpu row of results.json")
    p.add_argument("--note", help="with --record: the row's note (what the run did not show, what differed)")
    args = p.parse_args()
    if args.record:
        return record(args.record, args.note)
    args.model = args.model or ["qwen3-30b-a3b", "deepseek-v3"]
    args.modes = args.modes.split(",")
    if args.launch:
        return _launch_here(args)
    work = Path(tempfile.mkdtemp(prefix="triton-gpu-"))
    warmed = warm(args, work / "warmed")
    print(json.dumps({"warm_step": warmed}), file=sys.stderr)
    rounds = []
    result = {"models": args.model, "tp": args.tp, "arch_configs": ARCH, "target": TARGET, "warm_step": warmed,
              "rounds": rounds}
    for i in range(args.rounds):  # alternating: --modes' order in odd rounds, reversed in even ones
        for mode in args.modes if i % 2 == 0 else args.modes[::-1]:
            cache = work / f"{mode}-{i}"
            shutil.rmtree(cache, ignore_errors=True)
            if mode == "warm":
                shutil.copytree(work / "warmed", cache)
            else:
                cache.mkdir()
            rounds.append({"round": i + 1, "mode": mode, **launch(args, cache, no_compiler=mode == "warm")})
            print(json.dumps(rounds[-1]), file=sys.stderr)
            _write(args.out, result)  # after every round: a call's time limit keeps what was measured
    print(json.dumps(result, indent=1))
    return None


def _write(out: Path | None, result: dict) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


def record(path: Path, note: str | None) -> None:
    """The device run's JSON as the triton_cache_gpu row, with the medians of the rounds, dated today."""
    import datetime
    import statistics

    from results_file import record as write_row

    data = json.loads(path.read_text())
    by_mode = {m: [r["seconds"] for r in data["rounds"] if r["mode"] == m and r["seconds"] is not None]
               for m in ("cold", "warm")}
    data["medians"] = {f"{m}_s": round(statistics.median(v), 3) for m, v in by_mode.items() if v}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,  # noqa: S607
                          text=True, check=True).stdout.strip()
    device = data["rounds"][0]["device"] if data["rounds"] else "?"
    modes = ",".join(r["mode"] for r in data["rounds"] if r["round"] == 1)
    rounds = max((r["round"] for r in data["rounds"]), default=0)
    entry = {"date": datetime.date.today().isoformat(), "checkout": head, "machine": f"{device} (the device tool's "
             "machine: 16 CPU cores)", "engine": "none (no image: validation/ and aiter's source on the GPU host)",
             "command": "python benchmarks/triton_cache_gpu.py --aiter-src PIN_PATCHED --atom-src ATOM_PARENT "
                        f"--rounds {rounds} --modes {modes}", "result": data}
    write_row(ROOT / "benchmarks" / "results.json", "triton_cache_gpu", {**entry, **({"note": note} if note else {})})


if __name__ == "__main__":
    main()
