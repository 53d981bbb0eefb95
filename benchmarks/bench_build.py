"""Build benchmarks on the offline profile, side by side in one run (numbers, not assertions: not a test).

    python benchmarks/bench_build.py [--only ROW[,ROW]] [--registry 127.0.0.1:5000] [--out benchmarks/results.json]
    python benchmarks/render.py --write      # then benchmarks/README.md from results.json

It prunes the BuildKit cache and removes the offline images several times: run it on a build host you may do
that on. Measured, in order:
  single    one variant (gfx950 CK-free) cold: preflight -> patch, after `docker builder prune -af` and removing
            its images; per-step seconds, and per-unit seconds with the longest chain of units that need each
            other's images (what one graph of the units could buy with a core per unit), and each built unit's
            seconds of BuildKit's "exporting to image" from its log (what the image store costs)
  matrix    the 4 variants (gfx942/gfx950 x CK/CK-free) cold the same way, as build-clean builds them
            (cleanbuild.commands.build.build_matrix): all four at once on one BuildKit, what they share built once;
            wall and its ratio to `single` (goal <= 1.3); `--rounds N`: N pairs of a cold single and the matrix,
            every second one in the other order, and the ratio of the medians
  layers    the matrix's unique layer bytes over one image's bytes (goal <= 1.25), from the engine's layer store
  install   the clean step (cold, in `single`) over the floor for the same wheels: a plain unzip of every wheel
            into an empty folder on the host, same run (goal <= 1.5)
  noop      build-clean's steps again with nothing changed: seconds before validation starts
  digest    two cold builds of gfx950 CK-free, each after removing its images and pruning the cache: walls, and
            whether the wheels, clean and candidate digests came out the same (Docker >= 26, containerd store)
  tests     `nox -s tests` wall (the everyday tier; goal < 120 s)
  registry  a second machine's cold build-clean with the registry (pulls what the first pushed) vs without
  bump      after a cold build of gfx950 CK-free: an ATOM-only bump and an aiter-only bump (each its own profile
            file inheriting offline, with its own lock), then both again after `docker builder prune -af` with
            the cold build's images still there (a fresh node that pulled them): wheels and build-step seconds,
            which component builds ran, and the new release image's new bytes over its total bytes
  src       `--src aiter=CLONE` (gfx950 CK-free, the pinned images present): a one-line edit of aiter/tuned_gemm.py
            to a validated dev image (overlay route), then a one-line edit under csrc/, twice (the aiter wheel
            rebuilt, everything else reused): build steps (reading the checkout through the patch layer) and total
            (through validation, the dev tag and the report); this row prunes nothing.

  engines   `single` on this engine, then on the engine at --side, one after the other in one run (e.g. Docker 26
            here and Debian 12's dockerd 20.10 beside it: `dockerd --config-file EMPTY.json -H
            unix:///run/docker20.sock --data-root /var/lib/docker20 --exec-root /run/docker20 --pidfile
            /run/docker20.pid --iptables=false --bridge=none`; or 20.10 here and `.ci/install-docker.sh --side
            docker26`); each engine's version, store, wall
            and steps, and the ratio of the containerd store's build steps (wheels, clean, patch) to the classic
            store's (goal <= 1.15); `--rounds N`: N pairs, every second one in the other order, and the ratio of
            the medians (one pair's ratio here has moved between 1.31 and 1.48)
  engines_push  the engines row with --registry: each engine's cold build pushes every unit as it builds it (to
            a fresh prefix), as build-clean --registry does

`--only ROW[,ROW]` runs some rows (bump alone takes ~10 min on 2 cores). Each row is written to --out as it
finishes, with its date, engine and this command line; the entry it replaces moves to "superseded".
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildkit_log import exports  # noqa: E402  (benchmarks/, the script's folder)
from results_file import current, record  # noqa: E402

from cleanbuild.commands import build  # noqa: E402
from cleanbuild.core import engine  # noqa: E402
from cleanbuild.images import pipeline  # noqa: E402
from cleanbuild.images.plan import make_plan  # noqa: E402
from devsupport.builds import (  # noqa: E402
    AITER_BUMP,
    ATOM_BUMP,
    Variant,
    bumped_profile,
    forget,
    offline_plan,
)

BUILD = ("preflight", "prepare", "wheels", "clean", "patch")
MATRIX = (Variant("gfx942", False), Variant("gfx942", True), Variant("gfx950", False), Variant("gfx950", True))
LAYERDB = Path("/var/lib/docker/image/overlay2/layerdb/sha256")


def drop(client, plans, keep: frozenset[str] = frozenset()) -> None:
    """Every image of the plans here, by every name (devsupport.builds.forget), but keys in keep."""
    for plan in plans:
        if hasattr(plan, "units"):
            forget(client, [u for u in plan.units if u.key not in keep])
        else:  # the code before per-component keys: three content-keyed names
            for ref in (plan.patch.image, plan.clean.image, plan.wheels.image):
                engine.untag(client, ref)


def builder_prune(tries: int = 10) -> None:
    """`docker builder prune -af`, again while another build holds the cache (it then fails at once)."""
    for _ in range(tries):
        if subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True, check=False).returncode == 0:  # noqa: S603,S607
            return
        time.sleep(15)
    sys.exit("docker builder prune -af kept failing: another build holds the cache")


def prune(client, plans) -> None:
    """A cold start: no image of these plans and no BuildKit cache."""
    drop(client, plans)
    builder_prune()


def timed_run(client, plan, names=BUILD) -> tuple[float, dict[str, float]]:
    start = time.monotonic()
    rec = pipeline.run(plan, client, names, failed_report=False)
    return time.monotonic() - start, {s.name: round(s.seconds, 1) for s in rec.steps}


SAME_RUN: dict[str, float] = {}  # this run's cold single wall on the default engine, for the matrix row's ratio


def single(client, registry: str | None = None) -> dict:
    """One variant cold; with a registry (a fresh prefix there), every unit is pushed as it is built, as
    build-clean --registry does."""
    import os

    plan = offline_plan(MATRIX[3], run_id="bench")
    if registry:
        plan = with_registry(plan, registry)
    prune(client, [plan])
    start = time.monotonic()
    rec = pipeline.run(plan, client, BUILD, failed_report=False)
    wall = time.monotonic() - start
    if not os.environ.get("DOCKER_HOST") and not registry:
        SAME_RUN["single_wall_s"] = round(wall, 1)
    return {"variant": MATRIX[3].name, "wall_s": round(wall, 1), "steps": {s.name: round(s.seconds, 1) for s in rec.steps},
            "graph": graph(plan, rec)}


def with_registry(plan, prefix: str):
    """The same plan, its images named under a registry prefix (pushed as they are built)."""
    return make_plan(plan.profile, replace(plan.options, request=replace(plan.options.request, registry=prefix)))


def graph(plan, rec) -> dict:
    """What the graph of the plan's units buys (issue 31), from this run's per-unit seconds (each unit's build and
    export): their sum (the units one after another) and the longest chain of units that need each other's images
    (Plan.needs): the wall with a core per unit. The wheels step builds its units as that graph
    (cleanbuild.images.schedule); its wall is in the row's steps. And the part of each built unit's seconds that its
    BuildKit log gives the image export (benchmarks/buildkit_log.py): where the image store's seconds go."""
    seconds = {u.name: u.seconds for u in rec.units}
    began = {u.name: u.began for u in rec.units}
    needs = {u.name: list(plan.needs(u)) for u in plan.units}
    finish: dict[str, float] = {}

    def after(name: str, need: str) -> float:
        """When name could start, as far as need goes: built at once with it (name began before need ended: the
        clean step's layers), need's own seconds are inside name's, so from where need could start."""
        at_once = None not in (began.get(name), began.get(need)) and began[name] < began[need] + seconds.get(need, 0.0)
        return done(need) - seconds.get(need, 0.0) if at_once else done(need)

    def done(name: str) -> float:
        if name not in finish:
            finish[name] = seconds.get(name, 0.0) + max((after(name, d) for d in needs[name]), default=0.0)
        return finish[name]

    chain = [max(needs, key=done)]
    while needs[chain[-1]]:
        chain.append(max(needs[chain[-1]], key=done))
    exported = exports(plan.options.run_dir, [u.name for u in rec.units if u.status == "built"])
    return {"units_s": round(sum(seconds.values()), 1), "critical_path_s": round(done(chain[0]), 1),
            "units": {n: round(t, 1) for n, t in seconds.items()},
            "critical_path": chain[::-1],
            "exports_s": exported, "exports_total_s": round(sum(exported.values()), 1)}


def matrix(client) -> tuple[dict, list]:
    plans = [offline_plan(v, run_id="bench") for v in MATRIX]
    prune(client, plans)
    start = time.monotonic()
    pipeline.run(plans[0], client, ("preflight", "prepare"), failed_report=False)
    recs = build.build_matrix(client, plans)
    wall = round(time.monotonic() - start, 1)
    per = {p.stem: {s.name: round(s.seconds, 1) for s in rec.steps} for p, rec in zip(plans, recs, strict=True)}
    one = SAME_RUN.get("single_wall_s")  # measured earlier in this run (single, or engines' first row)
    return {"wall_s": wall, "steps": per, "single_wall_s": one, "over_single": round(wall / one, 2) if one else None}, plans


def matrix_rounds(client, args) -> dict:
    """The matrix row; with --rounds N, N pairs of the cold single and the matrix, every second one in the other
    order, and the ratio of the medians (one pair's ratio here has moved between 1.06 and 1.55)."""
    import statistics

    if args.rounds == 1:
        return matrix(client)[0]
    singles: list[float] = []
    rounds: list[dict] = []
    for round_ in range(args.rounds):
        one: dict = {"round": round_ + 1}
        for what in ("single", "matrix") if round_ % 2 == 0 else ("matrix", "single"):
            if what == "single":
                one["single_wall_s"] = single(client)["wall_s"]
            else:
                one.update({k: v for k, v in matrix(client)[0].items() if k in ("wall_s", "steps")})
        singles.append(one["single_wall_s"])
        one["over_single"] = round(one["wall_s"] / one["single_wall_s"], 2)
        rounds.append(one)
    walls = [r["wall_s"] for r in rounds]
    return {"rounds": rounds, "wall_s": statistics.median(walls), "single_wall_s": statistics.median(singles),
            "over_single": round(statistics.median(walls) / statistics.median(singles), 2), "steps": rounds[-1]["steps"]}


def layer_sizes(client, image: str) -> dict[str, int]:
    """diff ID -> bytes on disk, for the image's layers: the classic store's own layer store (chain IDs), else (the
    containerd store has no such folder: every size read 0 there) the sizes the engine's history gives each layer."""
    import hashlib

    if not LAYERDB.is_dir():
        paired = engine.layer_sizes(engine.history(client, image), engine.layers(client, image))
        if any(layer["digest"] is None for layer in paired):
            sys.exit(f"{image}: its history does not pair with its layers, so no layer's size is known")
        return {layer["digest"]: int(layer["size"]) for layer in paired}
    out, chain = {}, None
    for diff in engine.layers(client, image):
        chain = diff if chain is None else "sha256:" + hashlib.sha256(f"{chain} {diff}".encode()).hexdigest()
        size_file = LAYERDB / chain.removeprefix("sha256:") / "size"
        out[diff] = int(size_file.read_text()) if size_file.is_file() else 0
    return out


def layers(client, plans) -> dict:
    per = {p.stem: layer_sizes(client, p.patch.image) for p in plans}
    unique = {d: s for sizes in per.values() for d, s in sizes.items()}
    one = max(sum(sizes.values()) for sizes in per.values())
    return {"unique_bytes": sum(unique.values()), "one_image_bytes": one,
            "ratio": round(sum(unique.values()) / one, 3), "images": len(per)}


def unzip_floor(client, plan) -> float:
    """Every wheel of the wheels image unzipped into an empty folder: the least any install can do."""
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "wheels"
        subprocess.run(["docker", "create", "--name", "bench-wheels", plan.wheels.image, "/none"], check=True,  # noqa: S603,S607
                       capture_output=True)
        try:
            subprocess.run(["docker", "cp", "bench-wheels:/wheels", str(export)], check=True, capture_output=True)  # noqa: S603,S607
        finally:
            subprocess.run(["docker", "rm", "bench-wheels"], check=True, capture_output=True)  # noqa: S603,S607
        target = Path(tmp) / "site"
        target.mkdir()
        start = time.monotonic()
        for wheel in sorted(export.rglob("*.whl")):
            if "/installer/" not in str(wheel):
                with zipfile.ZipFile(wheel) as zf:
                    zf.extractall(target)
        return round(time.monotonic() - start, 1)


def digest(client) -> dict:
    """Two cold builds of gfx950 CK-free (images removed, BuildKit cache pruned before each): their walls and
    whether the wheels, clean and candidate digests are the same."""
    plan = offline_plan(MATRIX[3], run_id="bench-digest")
    walls, ids = [], []
    for _ in range(2):
        prune(client, [plan])
        walls.append(round(timed_run(client, plan)[0], 1))
        ids.append({u.name: engine.image_id(client, u.image) for u in plan.units if u.name in ("wheels", "clean", "candidate")})
    return {"variant": MATRIX[3].name, "cold_walls_s": walls, "digests": ids[0], "same_digests": ids[0] == ids[1],
            "second_digests": ids[1] if ids[0] != ids[1] else "same"}


def noop(client) -> dict:
    plan = offline_plan(MATRIX[3], run_id="bench-noop")
    return {"wall_s": round(timed_run(client, plan)[0], 2)}


def nox_tests() -> float:
    start = time.monotonic()
    proc = subprocess.run(["nox", "-s", "tests"], cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603,S607
    if proc.returncode:
        sys.exit(f"nox -s tests failed:\n{proc.stdout[-2000:]}")
    return round(time.monotonic() - start, 1)


def forget_machine(client, prefix: str) -> None:
    """A second machine: none of the first machine's images (every tag under the prefix), no BuildKit cache."""
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(prefix):
                client.images.remove(tag, force=True)
    builder_prune()


def registry_flow(client, registry: str) -> dict:
    plan = offline_plan(MATRIX[3], run_id="bench-reg")
    prefix = f"{registry}/bench-{int(time.time())}"
    remote = with_registry(plan, prefix)
    prune(client, [plan, remote])
    first, _ = timed_run(client, remote)  # machine 1: cold, builds and pushes
    forget_machine(client, prefix)
    second, steps = timed_run(client, remote)  # machine 2: pulls by content key
    prune(client, [plan])
    without, _ = timed_run(client, plan)  # machine 2 without a registry: cold from scratch
    return {"first_machine_s": round(first, 1), "second_machine_with_registry_s": round(second, 1),
            "second_machine_steps": steps, "second_machine_without_registry_s": round(without, 1)}


# ---- bump -----------------------------------------------------------------------------------------------------

def bump_profile(component: str, ref: str):
    return bumped_profile(ROOT / ".cache" / "bench-profiles", component, ref)


def new_bytes(client, before: str, after: str) -> dict:
    old = set(layer_sizes(client, before))
    sizes = layer_sizes(client, after)
    new = sum(s for d, s in sizes.items() if d not in old)
    total = sum(sizes.values())
    return {"new_bytes": new, "total_bytes": total, "new_share": round(new / total, 4) if total else None,
            "layers_new": sum(d not in old for d in sizes), "layers": len(sizes)}


def bump_run(client, base, profile, label: str) -> dict:
    plan = make_plan(profile, replace(base.options, run_id=f"bench-{label}"))
    shutil.rmtree(plan.options.run_dir, ignore_errors=True)  # its build logs say which images were built
    wall, steps = timed_run(client, plan)
    # one BuildKit log per unit built (and the candidate attestations' `docker load` log, not a build)
    built = sorted(p.stem for p in plan.options.run_dir.glob("*.log") if not p.stem.endswith(".load"))
    return {"wall_s": round(wall, 1), "steps": steps, "build_s": round(sum(steps.values()), 1),
            "units_built": built, **new_bytes(client, base.patch.image, plan.patch.image)}


def bump(client) -> dict:
    base = offline_plan(MATRIX[3], run_id="bench-bump")
    profiles = {"atom": bump_profile("atom", ATOM_BUMP), "aiter": bump_profile("aiter", AITER_BUMP)}
    prune(client, [base, *(make_plan(p, base.options) for p in profiles.values())])
    cold_wall, cold_steps = timed_run(client, base)
    out = {"cold": {"wall_s": round(cold_wall, 1), "steps": cold_steps, "build_s": round(sum(cold_steps.values()), 1)}}
    keep = frozenset(u.key for u in getattr(base, "units", ()))  # the cold build's images stay: a node that has them
    bumped = [make_plan(p, base.options) for p in profiles.values()]
    for cache in ("cache", "pruned"):
        for name, profile in profiles.items():
            drop(client, bumped, keep)
            if cache == "pruned":
                builder_prune()
            row = bump_run(client, base, profile, f"{name}-{cache}")
            row["build_share_of_cold"] = round(row["build_s"] / out["cold"]["build_s"], 3)
            out[f"{name}_{cache}"] = row
            print(f"BENCH {name}_{cache} " + json.dumps(row), flush=True)  # a row survives a later failure
    drop(client, bumped, keep)
    return out


# ---- src --------------------------------------------------------------------------------------------------------

# csrc twice: the first edit meets BuildKit's cache as it finds it (aiter's build environment, a BuildKit stage and
# no keyed image, may have been pruned), the second shows a developer's next edit.
SRC_EDITS = (("python", "aiter/tuned_gemm.py", "#"), ("csrc", "csrc/include/aiter_enum.h", "//"),
             ("csrc_again", "csrc/include/aiter_enum.h", "//"))
BUILD_STEPS = ("preflight", "prepare", "wheels", "clean", "dev", "patch")


def src_edit(client, repo: Path, name: str, rel: str, comment: str) -> dict:
    """One edit (new bytes every run, so no earlier dev image has its key) to a validated dev image."""
    from cleanbuild.request.checkout import resolve

    target = repo / rel
    original = target.read_bytes()
    target.write_bytes(original + f"{comment} bench edit {time.time_ns()}\n".encode())
    try:
        base = offline_plan(MATRIX[3], run_id=f"bench-src-{name}", allow_unservable=True)
        start = time.monotonic()
        found = resolve("aiter", repo, base.profile.component("aiter").ref)
        read_s = time.monotonic() - start
        plan = make_plan(base.profile, replace(base.options, src=(found,)))
        rec = pipeline.run(plan, client, plan.steps, failed_report=False)
        total = time.monotonic() - start
    finally:
        target.write_bytes(original)
    steps = {s.name: round(s.seconds, 1) for s in rec.steps}
    build = read_s + sum(s.seconds for s in rec.steps if s.name in BUILD_STEPS)
    return {"route": found.route, "decided_by": list(found.reasons), "read_checkout_s": round(read_s, 2),
            "steps": steps, "build_s": round(build, 1), "total_s": round(total, 1), "image": rec.dev_ref,
            "units_built": [u.name for u in rec.units if u.status == "built"]}


def src(client) -> dict:
    from devsupport.upstream import AITER_PIN, upstream_dir

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "aiter"
        git = ["git", "-c", "safe.directory=*", "-c", "advice.detachedHead=false"]
        subprocess.run([*git, "clone", "-q", "--no-checkout", str(upstream_dir() / "aiter.git"), str(repo)], check=True)  # noqa: S603
        subprocess.run([*git, "-C", str(repo), "checkout", "-q", AITER_PIN], check=True)  # noqa: S603
        for name, rel, comment in SRC_EDITS:
            out[name] = src_edit(client, repo, name, rel, comment)
    return out


FULL = ("single", "noop", "install", "matrix", "layers", "tests", "registry", "bump", "src")


def engines(client, args, push: bool = False) -> dict:
    """The cold single row on two engines, one after the other: this one, then --side's (DOCKER_HOST for the SDK
    and for every docker/buildx command the build runs). --rounds N: N such pairs, every second one in the other
    order (so neither engine always builds first); the ratio is of the two engines' median build steps. push:
    each engine's build pushes every unit to a fresh prefix of --registry (the classic store compresses a layer
    when it pushes it; the containerd store already has, when it built it)."""
    import os
    import statistics

    if not args.side:
        sys.exit("the engines row needs --side unix:///run/NAME.sock: a second engine (.ci/install-docker.sh --side)")
    rows, own = [], os.environ.get("DOCKER_HOST")
    try:
        for round_ in range(args.rounds):
            for host in (own, args.side) if round_ % 2 == 0 else (args.side, own):
                rows.append({"round": round_ + 1, **engine_single(host, args.registry if push else None)})
    finally:  # the rows after this one run on this engine again
        use_engine(own)
    for row in rows:  # the build steps: a fresh engine's prepare also imports the stand-in base once
        row["build_s"] = round(sum(row["steps"].get(n, 0.0) for n in ("wheels", "clean", "patch")), 1)
    classic = [r["build_s"] for r in rows if not r["containerd_store"]]
    containerd = [r["build_s"] for r in rows if r["containerd_store"]]
    ratio = round(statistics.median(containerd) / statistics.median(classic), 2) if classic and containerd else None
    return {"runs": rows, "rounds": args.rounds, "containerd_over_classic": ratio,
            "ratios": [round(a / b, 2) for a, b in zip(containerd, classic, strict=False)]}


def use_engine(host: str | None) -> None:
    import os

    if host is None:
        os.environ.pop("DOCKER_HOST", None)
    else:
        os.environ["DOCKER_HOST"] = host


def engine_single(host: str | None, registry: str | None) -> dict:
    """The cold single row on the engine at host (None: the default one); with a registry, to a fresh prefix."""
    use_engine(host)
    here = engine.client()
    facts = engine.preflight(here, 1.0)
    prefix = f"{registry}/bench-engines-{int(time.time())}" if registry else None
    return {"engine": f"Docker {facts.version}", "containerd_store": facts.containerd_store, "host": host or "default",
            **({"registry": prefix} if prefix else {}), **single(here, prefix)}


def install(client, args) -> dict:
    """The current single row's cold clean step over the unzip floor (the full run measures single first)."""
    cold = current(args.out, "single")
    if cold is None:
        sys.exit("the install row reads the single row's clean step: run --only single,install")
    floor = unzip_floor(client, offline_plan(MATRIX[3], run_id="bench"))
    return {"clean_step_cold_s": cold["steps"]["clean"], "unzip_floor_s": floor,
            "ratio": round(cold["steps"]["clean"] / floor, 2)}


ONLY = {"single": lambda client, a: single(client), "noop": lambda client, a: noop(client), "install": install,
        "matrix": matrix_rounds, "tests": lambda client, a: {"wall_s": nox_tests()},
        "layers": lambda client, a: layers(client, [offline_plan(v, run_id="bench") for v in MATRIX]),
        "registry": lambda client, a: registry_flow(client, a.registry), "bump": lambda client, a: bump(client),
        "src": lambda client, a: src(client), "digest": lambda client, a: digest(client), "engines": engines,
        "engines_push": lambda client, a: engines(client, a, push=True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default="127.0.0.1:5000")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.json")
    parser.add_argument("--only", default="", help=f"comma-separated rows: {','.join(ONLY)}")
    parser.add_argument("--side", help="the second engine of the engines row (unix:///run/NAME.sock)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="the engines and matrix rows: pairs of cold builds, in turn, and the ratio of the medians")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more pairs of cold builds")
    rows = args.only.split(",") if args.only else list(FULL)
    unknown = [row for row in rows if row not in ONLY]
    if unknown:
        parser.error(f"--only {','.join(unknown)}: not a row; the rows are {','.join(ONLY)}")
    client = engine.client()
    facts = engine.preflight(client, 1.0)
    store = "containerd image store" if facts.containerd_store else "classic image store"
    stamp = {"date": dt.date.today().isoformat(), "engine": f"Docker {facts.version}, {store}",
             "command": " ".join(["python", "benchmarks/bench_build.py", *sys.argv[1:]])}
    for row in rows:
        result = ONLY[row](client, args)
        record(args.out, row, {**stamp, "result": result})
        print(f"BENCH {row} " + json.dumps(result), flush=True)
    print("then: python benchmarks/render.py --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
