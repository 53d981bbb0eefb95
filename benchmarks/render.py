"""Writes benchmarks/README.md from benchmarks/results.json: one table per benchmark, the current measurement.

    python benchmarks/render.py            # print the page
    python benchmarks/render.py --write    # write benchmarks/README.md

Standard library only. Every row says its value, the date it was measured and the command that measured it; the
page is never edited by hand (tests/benchmarks/test_benchmarks_page.py fails when it differs from this script's output).
Earlier runs stay in results.json under "superseded" (CHANGELOG.md tells what changed between them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
PAGE = HERE / "README.md"

Rows = list[tuple[str, ...]]  # (what, value) or (what, value, the command when it is not the entry's)


def seconds(value: float) -> str:
    return f"{value:g} s"


def steps(result: dict, names: tuple[str, ...] = ("wheels", "clean", "patch")) -> str:
    parts = [f"{n} {result['steps'][n]:g}" for n in names if n in result.get("steps", {})]
    return f" ({', '.join(parts)})" if parts else ""


def gigabytes(count: int) -> str:
    return f"{count / 1e9:.2f} GB"


def minutes(value: float) -> str:
    return f"{int(value // 60)} min {int(value % 60)} s"


def single(r: dict) -> Rows:
    rows = [(f"{r['variant']} cold (BuildKit cache pruned, images removed): preflight -> patch",
             seconds(r["wall_s"]) + steps(r))]
    return rows + graph(r["graph"]) if "graph" in r else rows


def graph(g: dict) -> Rows:
    return [("the sum of its units' seconds (each unit's build and export)",
             seconds(g["units_s"])),
            ("the longest chain of units that need each other's images (the wall with a core per unit)",
             f"{seconds(g['critical_path_s'])}: {' -> '.join(g['critical_path'])}")] + exports(g)


def exports(g: dict) -> Rows:
    if "exports_s" not in g:
        return []
    top = sorted(g["exports_s"].items(), key=lambda kv: -kv[1])[:3]
    return [("of the units' seconds, BuildKit's \"exporting to image\" (blobs, image, name, unpack)",
             f"{seconds(g['exports_total_s'])}; most: {', '.join(f'{n} {s:g}' for n, s in top)}")]


def noop(r: dict) -> Rows:
    return [("build-clean's build steps again, nothing changed", seconds(r["wall_s"]))]


def engines(r: dict) -> Rows:
    rounds = r.get("rounds", 1)

    def who(run: dict) -> str:
        return (f"round {run['round']}: " if rounds > 1 else "") + run["engine"]

    rows = [(f"{who(run)}, {'containerd' if run['containerd_store'] else 'classic'} store: {run['variant']} cold",
             f"build steps {seconds(run['build_s'])}{steps(run)}; wall {seconds(run['wall_s'])}")
            for run in r["runs"]]
    for run in r["runs"]:
        rows += [(f"{who(run)}: {what}", value) for what, value in exports(run.get("graph", {}))]
    if r["containerd_over_classic"] is not None:
        each = f" (each round: {', '.join(f'{x:g}' for x in r['ratios'])})" if rounds > 1 else ""
        rows.append((f"containerd store over classic store, build steps{' of the medians' if rounds > 1 else ''}",
                     f"{r['containerd_over_classic']:g} x{each}"))
    return rows


def units(r: dict) -> Rows:
    rows = [(f"{r['variant']} cold: build steps", seconds(round(sum(r["steps"].get(n, 0.0) for n in ("wheels", "clean", "patch")), 1))
             + steps(r)),
            ("the units' seconds outside `docker buildx build`, all units", seconds(r["outside_build_total_s"]))]
    for name, parts in r["units"].items():
        rows.append((f"{name}: whole / buildx build / docker tag+inspect / reuse.decide",
                     " / ".join(seconds(parts.get(k, 0.0)) for k in ("total_s", "build_s", "docker_cli_s", "reuse_decide_s"))))
    return rows


def digest(r: dict) -> Rows:
    same = "the same" if r["same_digests"] else "DIFFERENT"
    return [(f"two cold builds of {r['variant']}", ", ".join(seconds(w) for w in r["cold_walls_s"])),
            ("wheels, clean and candidate digests of the two", same)]


def matrix(r: dict) -> Rows:
    if "rounds" in r:
        rows = [(f"round {one['round']}: four variants cold / one variant cold",
                 f"{seconds(one['wall_s'])} / {seconds(one['single_wall_s'])} = {one['over_single']:g} x")
                for one in r["rounds"]]
        rows.append(("the medians: four variants / one variant",
                     f"{seconds(r['wall_s'])} / {seconds(r['single_wall_s'])} = {r['over_single']:g} x"))
        return rows + [(f"clean step, {name} (last round)", seconds(s["clean"])) for name, s in r["steps"].items()]
    rows = [("four variants cold (gfx942/gfx950 x CK/CK-free)", seconds(r["wall_s"]))]
    if r.get("over_single") is not None:
        rows.append(("over one variant cold, same run", f"{seconds(r['single_wall_s'])}: {r['over_single']:g} x"))
    rows += [(f"clean step, {name}", seconds(s["clean"])) for name, s in r["steps"].items()]
    return rows


def layers(r: dict) -> Rows:
    return [(f"unique layer bytes of the {r['images']} variants / one image's bytes",
             f"{gigabytes(r['unique_bytes'])} / {gigabytes(r['one_image_bytes'])} = {r['ratio']:g}")]


def install(r: dict) -> Rows:
    return [("clean step (cold) / a plain unzip of the same wheels",
             f"{seconds(r['clean_step_cold_s'])} / {seconds(r['unzip_floor_s'])} = {r['ratio']:g}")]


def tests(r: dict) -> Rows:
    return [("`nox -s tests`, its venv reused", seconds(r["wall_s"]))]


def registry(r: dict) -> Rows:
    return [("first machine: cold build, push", seconds(r["first_machine_s"])),
             ("second machine, with the registry (pulls by key)",
              seconds(r["second_machine_with_registry_s"]) + steps({"steps": r["second_machine_steps"]}, ("wheels", "clean"))),
             ("second machine, without a registry (cold)", seconds(r["second_machine_without_registry_s"]))]


BUMP_ROWS = (("cold", "cold"), ("atom_cache", "ATOM-only bump"), ("atom_pruned", "ATOM-only bump, BuildKit cache pruned"),
             ("aiter_cache", "aiter-only bump"), ("aiter_pruned", "aiter-only bump, BuildKit cache pruned"))


def bump(r: dict) -> Rows:
    rows = []
    for key, what in BUMP_ROWS:
        row = r[key]
        value = seconds(row["build_s"]) + steps(row, ("wheels", "clean"))
        if "build_share_of_cold" in row:
            value += f" = {row['build_share_of_cold']:g} x cold; built {', '.join(row['units_built'])}"
            if row.get("new_share") is not None:  # None: the containerd store does not say a layer's size
                value += f"; new bytes {row['new_bytes'] / 1e6:.1f} MB = {row['new_share'] * 100:.1f} % of the image"
            else:
                value += f"; {row['layers_new']} of {row['layers']} layers new (the store gives no sizes)"
        rows.append((what, value))
    return rows


SRC_ROWS = (("python", "a one-line edit of aiter/tuned_gemm.py"), ("csrc", "a one-line edit of csrc/include/aiter_enum.h"),
            ("csrc_again", "the next edit of the same file"))


def src(r: dict) -> Rows:
    rows = []
    for key, what in SRC_ROWS:
        row = r[key]
        rows.append((f"{what} ({row['route']} route; built {', '.join(row['units_built'])})",
                     f"build {seconds(row['build_s'])}, through validation {seconds(row['total_s'])}"))
    return rows


def export(r: dict) -> Rows:
    rows: Rows = []
    for row in r["rows"]:
        if "way" in row:  # bench_export.py since 2026-12-03: the image store's ways
            value = f"build {seconds(row['wall_s'])}, of which exporting to image {seconds(row['export_s'])}"
            rows.append((f"{EXPORT_WAYS.get(row['way'], row['way'])}, the {r['unit']} unit", value))
            continue
        size = gigabytes(row["archive_bytes"]) if "archive_bytes" in row else f"{row['archive_gb']:g} GB"
        value = f"export {seconds(row['build_s'])}, load {seconds(row['load_s'])}, archive {size}"
        rows.append((f"{row['compression']}, the {r['unit']} layer", value, *([row["command"]] if "command" in row else [])))
    return rows


EXPORT_WAYS = {"ours": "the pipeline's reproducible export into the image store (zstd)",
               "gzip": "the same export with gzip",
               "default": "the engine's default (`docker buildx build --load`)"}


def ci(r: dict) -> Rows:
    return [("fresh clone, every tier", minutes(r["total_s"])),
            ("unit tier (`nox -s tests`)", f"{r['unit_passed']:,} passed, {r['unit_skipped']} skipped; pytest "
             f"{minutes(r['unit_pytest_s'])}"),
            ("typecheck (`nox -s typecheck`)", r["typecheck"]),
            ("integration tier (`nox -s integration`)", f"{r['integration_passed']} passed; {minutes(r['integration_s'])}")]


def tiers(r: dict) -> Rows:
    session = r.get("unit_session_after_s")
    serial = r.get("unit_serial_after_s")
    return [("unit tier before", f"{seconds(r['unit_before_s'])} of pytest ({r['unit_before_where']})"),
            ("unit tier after", f"{seconds(r['unit_after_s'])} of pytest"
             + (f", {seconds(session)} the session with its venv" if session else "") + f" ({r['unit_after_where']})"),
            ("unit tier after, one worker (`-p no:xdist`)",
             f"{seconds(serial)}, all passed" if serial else "not run for this row"),
            ("typecheck", seconds(r["typecheck_s"])),
            ("integration tier", f"{minutes(r['integration_s'])}: {r['integration_result']} ({r['integration_where']})"),
            ("fresh clone, every tier", f"about {r['ci_total_min']} min"),
            *([("fresh clone, every tier, emptied engine", f"{r['ci_emptied_engine_min']} min "
                f"({r['ci_emptied_engine_where']})")] if "ci_emptied_engine_min" in r else [])]


def tier_cpu(r: dict) -> Rows:
    kinds = [(f"sampled: {name} ({count} process{'es' if count > 1 else ''})", seconds(secs))
             for name, secs, count in r["kinds"]]
    files = [(f"sampled inside the workers: {name}", seconds(secs)) for name, secs in r["files"]]
    return [("the tier alone", f"{r['summary']}; wall {seconds(r['wall_s'])}"),
            ("its CPU, user + sys of every process (two cores give at most twice the wall)", seconds(r["cpu_s"])),
            ("the tier under py-spy", f"{r['spy_summary']}; wall {seconds(r['spy_wall_s'])}"),
            ("sampled, Python processes only", seconds(r["sampled_s"])), *kinds, *files]


def standin_env(r: dict) -> Rows:
    def pyc(counts: dict) -> str:
        return ", ".join(f"{n:,} {kind}" for kind, n in counts.items())

    rows: Rows = []
    for when in ("before", "after"):
        if when in r:
            run = r[when]
            rows += [(f"{when} ({run['checkout']}), the caller's PYTHONDONTWRITEBYTECODE {name}",
                      f"{run[name]['tar_sha256'][:19]}…; .pyc: {pyc(run[name]['pyc'])}") for name in ("unset", "set")]
            rows.append((f"{when}: one tar", "yes" if run["identical"] else "no, two"))
    return rows


def bisect(r: dict) -> Rows:
    found = "named the rerouting commit" if r["found"] else "did NOT name the rerouting commit"
    return [(f"a dispatcher regression among {r['commits']} commits", f"{found}; {r['check_runs']} validation runs "
             f"(bound {r['bound']}); each run {seconds(r['run_s_mean'])} on average, {seconds(r['run_s_max'])} at "
             f"most; {seconds(r['total_s'])} in all")]


def bisect_image(r: dict) -> Rows:
    found = "named the rerouting commit" if r["found"] else "did NOT name the rerouting commit"
    return [(f"a dispatcher regression among {r['commits']} commits of the real aiter", f"{found}; "
             f"{r['check_runs']} validation runs (bound {r['bound']}); --good (its image found by key) "
             f"{seconds(r['good_s'])}; each step that built an image {seconds(r['run_s_mean'])} on average, "
             f"{seconds(r['run_s_max'])} at most; {seconds(r['total_s'])} in all")]


# name -> (title, what it measures and its goal, the rows of its table). The page follows this order.
def payload(result: list) -> Rows:
    def arches(counts: dict) -> str:
        return ", ".join(f"{a} {b / 2**20:.1f} MiB" for a, b in sorted(counts.items())) or "none"

    rows: Rows = []
    for r in result:
        rows += [(f"{r['target']}: before the clean step", arches(r["before_bytes"])),
                 (f"{r['target']}: the image", arches(r["after_bytes"])),
                 (f"{r['target']}: reader over the image", f"{r['scan_wall_s']} s ({r['files_read']} files)")]
    return rows


def payload_scan(r: dict) -> Rows:
    return [(f"{side} ({r[side]['checkout']})", f"median {seconds(r[side]['median_cpu_s'])} of CPU "
             f"(rounds: {', '.join(f'{s:.3f}' for s in r[side]['cpu_s'])} s)") for side in ("before", "after")] + [
        ("the tree", f"{r['files_read']:,} files read, {r['pieces']:,} pieces of GPU code; the same manifest and "
                     f"pieces from both: {'yes' if r['same_answer'] else 'no'}")]


def tier_gc(r: dict) -> Rows:
    rows: Rows = []
    for mode, m in r["medians"].items():
        rows += [(f"{mode}: the collector, in the workers", f"{seconds(m['workers_gc_s'])} "
                  f"({m['collections']:,.0f} collections); the workers' CPU {seconds(m['workers_cpu_s'])}"),
                 (f"{mode}: the tier", f"wall {seconds(m['wall_s'])}; CPU of every process {seconds(m['cpu_s'])}")]
    return rows


def warm_step(r: dict) -> Rows:
    rows: Rows = [(f"round {x['round']}: {x['mode']}", f"patch step {seconds(x['patch_s'])} (candidate unit "
                   f"{seconds(x['candidate_s'])}, {x['candidate_how']}); the candidate's own layers "
                   f"{x['candidate_layer_bytes'] / 2**20:.1f} MiB" + (f"; {x['kernels']} kernels, cache "
                   f"{x['cache_bytes'] / 2**20:.1f} MiB" if x.get("kernels") is not None else "")) for x in r["runs"]]
    return rows + [("the warm step adds (medians)", f"{seconds(r['adds']['patch_s'])} to the patch step, "
                    f"{r['adds']['bytes'] / 2**20:.1f} MiB to the image")]


def route(r: dict) -> Rows:
    rows: Rows = []
    for model, m in r["models"].items():
        for when in ("before", "after"):
            x = m[when]
            sites = (f"; {x['missing_sites']} (layer, caller, module) triples missing; bf16 experts (from "
                     f"UnquantizedFusedMoEMethod.apply) missing: {', '.join(x['bf16_experts_missing']) or 'none'}"
                     if "missing_sites" in x else "")
            rows.append((f"{model}, {when}", f"{x['unservable']} of {x['layers']} layers may need a missing module "
                         f"(exit {x['exit']}): {', '.join(x['modules'])}{sites}; walk {seconds(x['seconds'])} (a "
                         f"fresh process), {x['unresolved']} calls not followed"))
    return rows


def triton_cache_gpu(r: dict) -> Rows:
    w = r.get("warm_step")
    rows: Rows = [("warm, no GPU visible", "not recorded (see the note)" if not w else
                   f"{w['kernels']} kernels for {r['target']} from {w['calls']} calls in {seconds(w['wall_s'])} on "
                   f"{w['jobs']} processes; {w['cache_bytes'] / 2**20:.1f} MiB; launchers "
                   f"{w['stubs']['launchers'] or w['stubs']['error']}")]
    for x in r["rounds"]:
        name = f"round {x['round']}: {x['mode']} ({x['device']})"
        if x.get("error"):
            rows.append((name, x["error"][:200]))
            continue
        counts = (f"{x['hits']} of {x['kernels']} kernels cache hits, {len(x['misses'])} misses, "
                  f"{len(x['failures'])} failed calls; " if "hits" in x else "")
        if "c_compiler" in x:
            found = [f"{k} {v}" for k, v in x["c_compiler"].items() if v]
            counts += f"C compiler: {', '.join(found) if found else 'none on PATH, CC unset'}; "
        rows.append((name, f"first calls {seconds(x['seconds'])} for {x['calls']} calls of "
                     f"{', '.join(r['models'])} tp {r['tp']} ({r['target']}, aiter's {r['arch_configs']} configs); "
                     + counts + "by entry: " + ", ".join(f"{k} {seconds(v)}" for k, v in x["per_entry"].items())))
    medians = r.get("medians") or {}
    if medians.get("cold_s") and medians.get("warm_s"):
        rows.append(("cold over warm (medians)", f"{medians['cold_s'] / medians['warm_s']:.0f} x "
                                                f"({seconds(medians['cold_s'])} against {seconds(medians['warm_s'])})"))
    return rows


BENCHMARKS: dict[str, tuple[str, str, Callable[[dict], Rows]]] = {
    "single": ("One variant, cold", "The build steps of gfx950 CK-free from nothing.", single),
    "noop": ("Nothing changed", "The same build steps again: every image reused by its key.", noop),
    "engines": ("Two engines, one run", "The cold single row on this engine, then on a second one beside it "
                "(bench_build.py --only engines --side SOCKET). Goal (issue 46): the containerd store at most 1.15 x the "
                "classic store in the median of three rounds in alternating order, no round above 1.25.", engines),
    "engines_push": ("Two engines, one run, pushing", "The engines row with a registry: each engine's cold build "
                     "pushes every unit as it builds it, to a fresh prefix (bench_build.py --only engines_push "
                     "--side SOCKET). The classic store compresses a layer when it pushes it; the containerd store "
                     "already has.", engines),
    "units": ("A unit's seconds, by part", "One cold single (gfx950 CK-free), each unit's seconds split into its "
              "`docker buildx build`, the docker CLI calls around it and reuse.decide (the engine's image lists and "
              "inspects); benchmarks/bench_units.py.", units),
    "digest": ("Reproducible digests", "Two cold builds, images removed and cache pruned before each.", digest),
    "matrix": ("Four variants", "gfx942/gfx950 x CK/CK-free cold, as build-clean builds them "
               "(commands.build_matrix: since 54537fe all four at once, a unit they share built once, and since "
               "1a8a84f one Triton-only aiter wheel for all four). Goal: at most 1.3 x one variant.", matrix),
    "layers": ("Layer sharing", "Bytes of the four variants' images together, from the engine's layer store. "
               "Goal: at most 1.25.", layers),
    "install": ("Install floor", "The clean step against unzipping its wheels into an empty folder. Goal: at most "
                "1.5 (not met: the step also compiles bytecode and checks the install).", install),
    "tests": ("Everyday tests", "The unit tier. Goal: under 120 s.", tests),
    "registry": ("Build once, pull elsewhere", "A second machine pulls what the first pushed.", registry),
    "bump": ("Pin bumps", "After a cold build, an ATOM-only and an aiter-only bump (each a profile relocked as "
             "`atom-build pins --bump` does), with and without BuildKit's cache. New bytes: the release image's "
             "layers the cold build lacks. Goal: at most 25 % of the cold build's time, 5 % of its bytes.", bump),
    "src": ("Iterating on a checkout", "`--src aiter=CLONE` of gfx950 CK-free with the pinned images present. "
            "Goal for the Python edit: at most 10 s of build steps.", src),
    "export": ("The image store's cost per way of exporting", "One unit built with `--no-cache` once per way, one after "
               "the other, and the seconds its BuildKit log gives \"exporting to image\" (benchmarks/bench_export.py).",
               export),
    "bisect": ("Bisect", "`atom-build bisect aiter --check gemm-hipblaslt` on a hand-made history whose one commit "
               "reroutes untuned GEMMs to torch, on the CPU. Goal: at most ceil(log2 N) + 2 validation runs, each "
               "under a minute.", bisect),
    "bisect_image": ("Bisect through image builds", "`atom-build bisect aiter --image --check gemm-hipblaslt` over "
                     "commits made on the real aiter pin, one of which points solMap's hipblaslt entry at torch: each "
                     "step builds the commit's gfx950 CK-free image and validates inside it on the CPU. Goal: at "
                     "most ceil(log2 N) + 2 validation runs; a step costs what an aiter-only bump costs.",
                     bisect_image),
    "payload": ("GPU code per arch", "AMDGPU code objects and bundle entries in each offline image, read from their "
                "bytes (validation.payload): before the clean step (what aiter's wheel carries, the image's kept plus "
                "left-out bytes) and after (the image), and the reader's wall time over the whole image in a "
                "container.", payload),
    "payload_scan": ("The payload reader's CPU", "validation.payload.scan over aiter's hsa/ at the pin under an "
                     "image-like site-packages and the host's own site-packages (torch, triton), each checkout's "
                     "reader in a process of its own, in alternating rounds (benchmarks/payload_scan.py).",
                     payload_scan),
    "ci": ("CI", "What CI runs, on a fresh clone.", ci),
    "tiers": ("Test tiers", "The everyday tier before and after pytest-xdist, the slow tests' cuts and the tier's "
              "garbage collector settings (issue 46), the typecheck and the integration tier. Goal: the unit tier "
              "under 60 s of pytest in a fresh clone (met at 15f77c6: 51.33 s, and 34290a4: 53.54 s; 62.47 s at 56a70eb, "
              "started right after emptying the engine), a fresh clone's `bash .ci/run` under 25 minutes on an "
              "emptied engine (met at 0491cc5, 1175fab, cbc49a6, f4fc2e8, 7fbff9e, 6b2c8ff, ebffbc1, 87f0239, 56a70eb, "
              "34290a4 and 15f77c6; 25.5 min at e99c2f6 half an hour before cbc49a6's 23.8).", tiers),
    "standin_env": ("The stand-in's tar and the caller's environment", "The offline stand-in's tar made twice by "
                    "cleanbuild.images.standin.make, the caller's PYTHONDONTWRITEBYTECODE unset (as nox runs the tests) "
                    "then set, in a checkout before plan.STANDIN_ENV and in this one, in one run. Goal: one tar.",
                    standin_env),
    "tier_cpu": ("Where the unit tier's CPU goes", "`nox -s tests`'s pytest run alone, for its wall and its CPU "
                 "seconds (the kernel's accounting of every process it started: git, tar and uv's binary included), "
                 "then under py-spy, which samples the workers and every Python process a test starts (a process "
                 "waiting for a core counts: read the samples as shares). A test module's import (collection) "
                 "counts for its file.", tier_cpu),
    "tier_gc": ("The unit tier's garbage collector", "`nox -s tests`'s pytest run with CPython's collector settings "
                "(tests/support/gc_tuning.py blocked) and with the tier's (the survivors of collection frozen, the "
                "youngest generation collected every 50,000 allocations), in alternating order; a meter in each "
                "worker adds up the seconds inside collections (benchmarks/tier_gc.py). Medians.", tier_gc),
    "warm_step": ("The warm step's cost", "The patch step of an offline gfx950 CK-free build with the Triton cache "
                  "warmed (the offline profile's warm.models) and without (warm.enabled=false), alternating, each "
                  "from the same reused clean image with BuildKit's cache pruned (benchmarks/warm_step.py). The "
                  "candidate is rebuilt whenever anything below it changes: its cost is the same in a cold build and "
                  "in any bump.", warm_step),
    "route": ("What a CK-free image's route needs", "Each preset's route (python -m validation.route) through ATOM "
              "and aiter at the pins, patched, in the CK-free image's environment: before, an earlier checkout's "
              "patches and walk (or, without one, ATOM's ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE at its default); "
              "after, this checkout's (benchmarks/route_walk.py). No build, no engine: code read from the two "
              "packages.", route),
    "triton_cache_gpu": ("The Triton cache on a GPU", "Warm with no GPU visible (the stand-in driver, target "
                         "cuda:90), then the same calls launched on the GPU in fresh processes: cold (an empty cache) "
                         "and warm (the warmed cache; Triton's C builds refused and no C compiler on PATH, as in an "
                         "image with none), in the order --modes gives, then alternating "
                         "(benchmarks/triton_cache_gpu.py). The first call's wall time of every call, "
                         "synchronised. A ROCm target differs only in the target string.", triton_cache_gpu),
}


def section(name: str, entry: dict, machine: str) -> list[str]:
    if name not in BENCHMARKS:
        raise SystemExit(f"rendering failed because results.json has a benchmark {name!r} this script does not know. "
                         f"To fix, add it to BENCHMARKS in {Path(__file__).name}.")
    title, about, rows = BENCHMARKS[name]
    note = f" Note: {entry['note']}." if entry.get("note") else ""
    lines = [f"## {title}", "", f"{about} Machine: {entry.get('machine') or machine}. Engine: {entry['engine']}.{note}",
             ""]
    when = entry["date"] + (f" ({entry['checkout']})" if entry.get("checkout") else "")
    lines += ["| what | value | date | command |", "| --- | --- | --- | --- |"]
    for what, value, *command in rows(entry["result"]):
        lines.append(f"| {what} | {value} | {when} | `{command[0] if command else entry['command']}` |")
    return [*lines, ""]


def render(results: dict) -> str:
    if results.get("schema") != 2:
        raise SystemExit("rendering failed because results.json is not schema 2. To fix, restore it from git.")
    benchmarks = results["benchmarks"]
    lines = ["# Benchmarks", "",
             "<!-- Generated by benchmarks/render.py from benchmarks/results.json: do not edit. -->", "",
             f"The offline profile, measured on {results['machine']} unless a table names another machine. Each table is the "
             "newest run of its benchmark; `python benchmarks/bench_build.py --only ROW` re-runs one (it prunes the "
             "BuildKit cache and removes the offline images) and records its date and command in results.json; "
             "`python benchmarks/render.py --write` then rewrites this page. Earlier runs are kept in results.json "
             "under `superseded`.", ""]
    for name in [n for n in BENCHMARKS if n in benchmarks] + [n for n in benchmarks if n not in BENCHMARKS]:
        lines += section(name, benchmarks[name], results["machine"])
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.name} instead of printing it")
    args = parser.parse_args(argv)
    page = render(json.loads(RESULTS.read_text()))
    if args.write:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
