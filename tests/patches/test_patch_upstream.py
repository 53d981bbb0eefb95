"""Every patch against every real aiter and ATOM version in shared/upstream.

The five named snapshots (plus aiter's pull-request head) get an exact outcome
table; every commit the repositories hold (main since 2026-07-25) gets the
sweep: the outcome is applied, already-applied or upstream-fixed (never drift),
a second apply writes nothing, and the patched functions, executed with small
stubs, do what the patches promise. Commits are deduplicated by the blob ids
of the target files, so each distinct file content is checked once.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

import pytest
from patch_helpers import ENVS, JIT_CORE, LINEAR, TUNED_GEMM, snapshot
from patch_stubs import (
    BF16,
    FP32,
    BuildFailed,
    RecordingLogger,
    UnstubbedError,
    build_module_stubs,
    call_build_module,
    chip_info_modules,
    functions_from,
    module_from,
    tuned_gemm_stubs,
    write_tuned_csv,
)
from patch_upstream_repos import GROUPS, NAMED, commits, missing_reason, versions

from patches import engine
from patches.catalog import PATCHES
from validation.aiterpkg import gemm_dispatch
from validation.aiterpkg import (
    tuned_lookup as aiter_lookup,  # `tuned_lookup` is a fixture here
)
from validation.aiterpkg.gemm_dispatch import Call

OK = {"applied", "already-applied", "upstream-fixed"}
PATCHES_OF = {
    "tuned_gemm": {"tuned-gemm-hipblaslt", "no-asm-gemm-gfx950"},
    "jit_core": {"jit-core-runtime-error"},
    "atom": {"atom-ck-free-triton-gemm"},
    "atom_moe": {"atom-ck-free-triton-moe"},
    "atom_norm": {"atom-ck-free-triton-norm"},
    "atom_act": {"atom-ck-free-native-act"},
    "atom_topk": {"atom-ck-free-native-topk"},
}


def pytest_generate_tests(metafunc):
    """One case per distinct content of a group's files (a placeholder when the repositories are absent)."""
    for group in GROUPS:
        arg = f"{group}_version"
        if arg in metafunc.fixturenames:
            found = versions(group) if missing_reason() is None else ()
            params = [pytest.param(v, id=v.id) for v in found] or [pytest.param(None, id="upstream-missing")]
            metafunc.parametrize(arg, params)


@pytest.fixture(autouse=True)
def _upstream_present():
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the real upstream repositories are needed in CI: {reason}")
    pytest.skip(reason)


def version_of(group: str, sha: str):
    return next(v for v in versions(group) if v.has(sha))


def root_for(tmp_path: Path, repo: str, sha: str) -> Path:
    """A root holding the repository's target files at sha."""
    root = tmp_path / "root"
    for group, (group_repo, _) in GROUPS.items():
        if group_repo == repo:
            version_of(group, sha).write(root)
    return root


@functools.cache
def applied_twice(version) -> tuple[engine.Report, dict[str, bytes], engine.Report, dict[str, bytes]]:
    """`apply`, then `apply` again, on the version's files: each report with the
    files it left (computed once per version; several tests read it)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = version.write(Path(tmp))
        first = engine.run(root, PATCHES, "apply")
        once = snapshot(root)
        again = engine.run(root, PATCHES, "apply")
        return first, once, again, snapshot(root)


def patched(version) -> dict[str, bytes]:
    first, once, _, _ = applied_twice(version)
    assert first.exit_code == 0, [r.detail for r in first.drifted]
    return once


def executed(version, run):
    """run(), or a skip that names what the stubs lack (never a silent pass)."""
    try:
        return run()
    except UnstubbedError as exc:
        pytest.skip(f"{version.id} cannot be executed here: {exc} (unrelated to the patch)")


# --- the named snapshots ------------------------------------------------------------------

AITER_PATCHES = ("tuned-gemm-hipblaslt", "no-asm-gemm-gfx950", "jit-core-runtime-error")
ATOM_PATCHES = (
    "atom-ck-free-triton-gemm",
    "atom-ck-free-triton-moe",
    "atom-ck-free-triton-norm",
    "atom-ck-free-native-act",
    "atom-ck-free-native-topk",
)
EXPECTED = {
    "aiter 2026-01-20": ("aiter", NAMED["aiter"]["2026-01-20"], ("applied", "applied", "applied")),
    "aiter 2026-08-03": ("aiter", NAMED["aiter"]["2026-08-03"], ("applied", "applied", "upstream-fixed")),
    "aiter main 2026-08-22": (
        "aiter",
        NAMED["aiter"]["main 2026-08-22"],
        ("applied", "applied", "upstream-fixed"),
    ),
    "aiter pull/4465/head": (
        "aiter",
        NAMED["aiter"]["pull/4465/head"],
        ("applied", "applied", "upstream-fixed"),
    ),
    "atom 2026-07-31": ("atom", NAMED["atom"]["2026-07-31"], ("applied",) * 5),
    "atom main 2026-08-22": ("atom", NAMED["atom"]["main 2026-08-22"], ("applied",) * 5),
}


@pytest.mark.parametrize(("repo", "sha", "expected"), list(EXPECTED.values()), ids=list(EXPECTED))
def test_named_snapshot_outcomes(tmp_path, repo, sha, expected):
    names = AITER_PATCHES if repo == "aiter" else ATOM_PATCHES
    report = engine.run(root_for(tmp_path, repo, sha), PATCHES, "apply")
    outcomes = {r.name: r.outcome for r in report.results}
    assert tuple(outcomes[name] for name in names) == expected
    assert report.exit_code == 0


@pytest.mark.parametrize("repo", ["aiter", "atom"])
def test_the_sweep_covers_every_named_commit(repo):
    held = {c.sha for c in commits(repo)}
    assert set(NAMED[repo].values()) <= held


@pytest.mark.parametrize("group", list(GROUPS))
def test_every_commit_is_in_exactly_one_version(group):
    repo, _ = GROUPS[group]
    swept = [c.sha for v in versions(group) for c in v.commits]
    assert sorted(swept) == sorted(c.sha for c in commits(repo))


def test_head_keeps_gfx1250_on_triton(tuned_lookup):
    """The rule's reason to exist: aiter main routes untuned gfx1250 shapes to Triton, and still does."""
    data = patched(version_of("tuned_gemm", NAMED["aiter"]["main 2026-08-22"]))[TUNED_GEMM]
    assert tuned_lookup(data, "gfx1250")(**UNTUNED)["libtype"] == "triton"


def test_pre_fix_build_module_really_exits(tmp_path):
    """The harness reaches the failure path: unpatched 2026-01 code raises SystemExit there."""
    version = version_of("jit_core", NAMED["aiter"]["2026-01-20"])
    build = functions_from(
        version.file(JIT_CORE), ["build_module"], build_module_stubs(tmp_path, RecordingLogger())
    )
    with pytest.raises(SystemExit):
        call_build_module(build["build_module"])


# --- the sweep: outcome and idempotence ------------------------------------------------------


def assert_patches_cleanly(version):
    first, _, _, _ = applied_twice(version)
    outcomes = {r.name: r.outcome for r in first.results if r.name in PATCHES_OF[version.group]}
    bad = {name: outcome for name, outcome in outcomes.items() if outcome not in OK}
    assert bad == {}, [r.detail for r in first.results if r.name in bad]


def assert_reapply_is_noop(version):
    _, once, again, twice = applied_twice(version)
    assert (again.written, twice) == ([], once)


def test_tuned_gemm_outcome(tuned_gemm_version):
    assert_patches_cleanly(tuned_gemm_version)


def test_tuned_gemm_reapply_is_noop(tuned_gemm_version):
    assert_reapply_is_noop(tuned_gemm_version)


def test_jit_core_outcome(jit_core_version):
    assert_patches_cleanly(jit_core_version)


def test_jit_core_reapply_is_noop(jit_core_version):
    assert_reapply_is_noop(jit_core_version)


def test_atom_outcome(atom_version):
    assert_patches_cleanly(atom_version)


def test_atom_reapply_is_noop(atom_version):
    assert_reapply_is_noop(atom_version)


# --- behaviour: aiter/tuned_gemm.py ---------------------------------------------------------

UNTUNED = {"M": 4096, "N": 4096, "K": 4096, "bias": False, "dtype": str(BF16), "otype": str(BF16)}
TUNED_ASM = {"M": 64, "N": 256, "K": 5120, "bias": False, "dtype": str(BF16), "otype": str(FP32)}
ASM_ROW = {
    **{k: TUNED_ASM[k] for k in ("M", "N", "K")},
    "dtype": str(BF16),
    "outdtype": str(FP32),
    "bpreshuffle": False,
    "libtype": "asm",
    "solidx": 1,
    "kernelName": "_ZN5aiter_fake_asm_64E",
}
ASM_CHOICES = {  # the two ways asm reaches the dispatcher
    "tuned-csv-row": TUNED_ASM,
    "bpreshuffle-default": {**UNTUNED, "M": 512, "bpreshuffle": True},
}


@pytest.fixture
def tuned_lookup(tmp_path, monkeypatch):
    """lookup(file bytes, gfx) -> that file's get_GEMM_A16W16_config on that arch, tuned CSV included."""

    def lookup(data: bytes, gfx: str):
        for name, module in chip_info_modules(gfx).items():
            monkeypatch.setitem(sys.modules, name, module)
        tuned = write_tuned_csv(tmp_path / f"tuned-{gfx}.csv", gfx, [ASM_ROW])
        namespace = functions_from(
            data, ["get_GEMM_A16W16_config"], tuned_gemm_stubs(gfx, tuned, RecordingLogger())
        )
        return namespace["get_GEMM_A16W16_config"]

    return lookup


def choice(config: dict) -> tuple:
    return config["libtype"], config["solidx"]


@pytest.mark.parametrize("gfx", ["gfx942", "gfx950"])
def test_untuned_shape_gets_hipblaslt(tuned_gemm_version, tuned_lookup, gfx):
    get_config = tuned_lookup(patched(tuned_gemm_version)[TUNED_GEMM], gfx)
    assert executed(tuned_gemm_version, lambda: choice(get_config(**UNTUNED))) == ("hipblaslt", -1)


def test_gfx1250_keeps_its_own_route(tuned_gemm_version, tuned_lookup):
    """Where upstream has a gfx1250 route (Triton) it stays; where gfx1250 took the torch fallback it gets hipBLASLt."""
    version = tuned_gemm_version
    before = executed(version, lambda: choice(tuned_lookup(version.file(TUNED_GEMM), "gfx1250")(**UNTUNED)))
    after = executed(
        version, lambda: choice(tuned_lookup(patched(version)[TUNED_GEMM], "gfx1250")(**UNTUNED))
    )
    assert after == (("hipblaslt", -1) if before[0] == "torch" else before)


@pytest.mark.parametrize("case", list(ASM_CHOICES))
def test_asm_is_never_chosen_on_gfx950(tuned_gemm_version, tuned_lookup, case):
    get_config = tuned_lookup(patched(tuned_gemm_version)[TUNED_GEMM], "gfx950")
    assert executed(tuned_gemm_version, lambda: choice(get_config(**ASM_CHOICES[case]))) == ("hipblaslt", -1)


@pytest.mark.parametrize("case", list(ASM_CHOICES))
def test_unpatched_gfx950_did_choose_asm(tuned_gemm_version, tuned_lookup, case):
    """What the ban is for: the stubs reproduce upstream's asm choice on gfx950."""
    get_config = tuned_lookup(tuned_gemm_version.file(TUNED_GEMM), "gfx950")
    assert executed(tuned_gemm_version, lambda: get_config(**ASM_CHOICES[case])["libtype"]) == "asm"


@pytest.mark.parametrize("case", list(ASM_CHOICES))
def test_gfx942_choice_is_unchanged(tuned_gemm_version, tuned_lookup, case):
    version = tuned_gemm_version
    before = executed(version, lambda: tuned_lookup(version.file(TUNED_GEMM), "gfx942")(**ASM_CHOICES[case]))
    after = executed(
        version, lambda: tuned_lookup(patched(version)[TUNED_GEMM], "gfx942")(**ASM_CHOICES[case])
    )
    assert after == before


# --- behaviour: the dispatcher ATOM calls (tgemm.mm), executed as validation executes it -----------------

DISPATCH_UNTUNED = Call(4096, 4096, 4096)  # no tuned CSV in these runs: every shape takes aiter's default
DISPATCH_PRESHUFFLED = Call(512, 4096, 4096, preshuffled=True)  # the bpreshuffle default: asm on gfx950 upstream


def dispatched(data: bytes, tmp_path: Path, gfx: str, call: Call) -> list[str]:
    """The backends tgemm.mm of this tuned_gemm.py reaches for call (validation.aiterpkg.gemm_dispatch, no tuned CSV)."""
    pkg = tmp_path / gfx / "aiter"
    pkg.mkdir(parents=True)
    (pkg / "tuned_gemm.py").write_bytes(data)
    kernels = gemm_dispatch.StubbedKernels()
    with aiter_lookup.load(pkg, gfx, {"gfx942": 304, "gfx950": 256}[gfx], on_call=kernels) as lookup:
        if call.preshuffled and not lookup.accepts("bpreshuffle"):
            pytest.skip("this aiter's lookup has no bpreshuffle")
        return gemm_dispatch.run_stubbed(lookup.module, kernels, call).backends()


@pytest.mark.parametrize("gfx", ["gfx942", "gfx950"])
def test_patched_dispatcher_reaches_hipblaslt(tuned_gemm_version, tmp_path, gfx):
    """"applied" means what ATOM calls runs hipBLASLt for an untuned shape, not only that the lookup says so."""
    assert dispatched(patched(tuned_gemm_version)[TUNED_GEMM], tmp_path, gfx, DISPATCH_UNTUNED) == ["hipblaslt"]


def test_unpatched_dispatcher_reached_torch(tuned_gemm_version, tmp_path):
    """What the patch is for, seen at the dispatcher: upstream's untuned shape runs torch."""
    assert dispatched(tuned_gemm_version.file(TUNED_GEMM), tmp_path, "gfx942", DISPATCH_UNTUNED) == ["torch"]


def test_patched_dispatcher_never_reaches_asm_on_gfx950(tuned_gemm_version, tmp_path):
    data = patched(tuned_gemm_version)[TUNED_GEMM]
    assert dispatched(data, tmp_path, "gfx950", DISPATCH_PRESHUFFLED) == ["hipblaslt"]


# --- behaviour: aiter/jit/core.py -------------------------------------------------------------


def test_failed_build_raises_chained_runtime_error(jit_core_version, tmp_path):
    stubs = build_module_stubs(tmp_path, RecordingLogger())
    build = functions_from(patched(jit_core_version)[JIT_CORE], ["build_module"], stubs)["build_module"]
    with pytest.raises(RuntimeError) as info:
        executed(jit_core_version, lambda: call_build_module(build))
    assert isinstance(info.value.__cause__, BuildFailed)


# --- behaviour: ATOM ----------------------------------------------------------------------------


def use_triton_gemm(files: dict[str, bytes]):
    """use_triton_gemm() of linear.py, reading the real (patched or not) envs.py."""
    envs = module_from(files[ENVS], "atom.utils.envs")
    return functions_from(files[LINEAR], ["use_triton_gemm"], {"envs": envs})["use_triton_gemm"]


@pytest.mark.parametrize("triton_gemm", ["0", "1"])
def test_ck_free_turns_triton_gemm_on(atom_version, monkeypatch, triton_gemm):
    monkeypatch.setenv("ATOM_USE_TRITON_GEMM", triton_gemm)
    monkeypatch.setenv("ATOM_CK_FREE", "1")
    patched_gemm = use_triton_gemm(patched(atom_version))
    assert bool(executed(atom_version, patched_gemm)) is True


@pytest.mark.parametrize("triton_gemm", ["0", "1"])
def test_without_ck_free_nothing_changes(atom_version, monkeypatch, triton_gemm):
    monkeypatch.setenv("ATOM_USE_TRITON_GEMM", triton_gemm)
    monkeypatch.delenv("ATOM_CK_FREE", raising=False)
    upstream_gemm = use_triton_gemm(dict(atom_version.files))
    patched_gemm = use_triton_gemm(patched(atom_version))
    assert bool(executed(atom_version, patched_gemm)) is bool(executed(atom_version, upstream_gemm))


@pytest.mark.parametrize("triton_gemm", ["0", "1"])
def test_unpatched_follows_atom_use_triton_gemm(atom_version, monkeypatch, triton_gemm):
    """The stubs wire the real envs.py: upstream's own switch works as upstream wrote it."""
    monkeypatch.setenv("ATOM_USE_TRITON_GEMM", triton_gemm)
    upstream_gemm = use_triton_gemm(dict(atom_version.files))
    assert bool(executed(atom_version, upstream_gemm)) is (triton_gemm == "1")
