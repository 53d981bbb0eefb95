"""`--src COMPONENT=PATH`: classification (pure), resolution of real git checkouts, and what it does to the plan.

Resolution runs on tiny hand-made repositories in tmp_path and on a clone of the real aiter at the profile's pin
with a one-line edit; the planner tests feed it checkouts resolved the same way.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from invoke import Program

import tasks
from cleanbuild.core.errors import UsageError
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import plan as P
from cleanbuild.images import srcplan
from cleanbuild.request import checkout as C
from cleanbuild.upstream import profiles
from tests.support.gitrepos import commit_all, git
from tests.support.requests import build_of
from tests.support.upstream import AITER_HEAD, AITER_PIN, writable_copy


def make_tiny_aiter(repo: Path) -> tuple[Path, str]:
    """A hand-made aiter checkout: aiter/ package, setup.py, csrc/, one commit (the 'pin')."""
    for rel, text in {"setup.py": "setup()\n", "aiter/__init__.py": "", "aiter/tuned_gemm.py": "x = 1\n",
                      "aiter/configs/bf16_tuned_gemm.csv": "gfx,cu_num\n", "csrc/gemm.cu": "// kernel\n",
                      "docs/index.md": "# docs\n", "aiter/old.py": "gone = True\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    return repo, commit_all(repo, "pin")


@pytest.fixture
def tiny_aiter(tmp_path) -> tuple[Path, str]:
    return make_tiny_aiter(tmp_path / "aiter")


def change(path: str, status: str = "modified") -> C.Change:
    return C.Change(path, status, "0" * 40)


# ---- classification (pure) ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,expected", [
    ("aiter/tuned_gemm.py", "overlay"), ("aiter/configs/bf16_tuned_gemm.csv", "overlay"),
    ("aiter/ops/triton/configs/gemm.json", "overlay"), ("aiter/jit/build/kernel.so", "wheel"),
    ("csrc/kernels/gemm.cu", "wheel"), ("hsa/gfx950/fmha.co", "wheel"), ("3rdparty/composable_kernel", "wheel"),
    ("setup.py", "wheel"), ("pyproject.toml", "wheel"), ("CMakeLists.txt", "wheel"), ("requirements.txt", "wheel"),
    ("gradlib/gemm.cpp", "wheel"), ("op_tests/test_gemm.py", "ignored"), ("docs/guide.md", "ignored"),
    ("README.md", "ignored"),
])
def test_each_aiter_file_kind(path, expected):
    assert C.kind("aiter", path) == expected


def test_atom_package_python_is_overlay():
    assert C.kind("atom", "atom/model_ops/linear.py") == "overlay"


def test_aiter_package_of_atom_is_not_atoms_overlay():
    assert C.kind("atom", "aiter/tuned_gemm.py") == "wheel"


def test_python_only_edit_takes_the_overlay_route():
    assert C.classify("aiter", (change("aiter/tuned_gemm.py"),), "same") == ("overlay", ("aiter/tuned_gemm.py",))


def test_one_compiled_file_sends_everything_to_the_wheel_route():
    found = C.classify("aiter", (change("aiter/tuned_gemm.py"), change("csrc/gemm.cu")), "descendant")
    assert found == ("wheel", ("csrc/gemm.cu",))


def test_only_unshipped_files_change_nothing():
    assert C.classify("aiter", (change("op_tests/test_gemm.py"),), "same") == ("none", ())


def test_an_unrelated_head_takes_the_wheel_route_whatever_changed():
    assert C.classify("aiter", (), "unrelated")[0] == "wheel"


@pytest.mark.parametrize("spec,needle", [("aiter", "is not COMPONENT=PATH"), ("aiter=", "is not COMPONENT=PATH"),
                                         ("torch=/x", "cannot be built from a checkout")])
def test_bad_spec_is_bad_input(spec, needle):
    with pytest.raises(UsageError, match=needle):
        C.parse_spec(spec)


# ---- resolution on hand-made repositories -------------------------------------------------------------------

def test_uncommitted_edit_is_seen_and_the_checkout_is_left_alone(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    status_before = git(repo, "status", "--porcelain")
    found = C.resolve("aiter", repo, pin)
    assert (found.route, found.changes[0].path, git(repo, "status", "--porcelain")) == (
        "overlay", "aiter/tuned_gemm.py", status_before)


def test_the_checkout_gains_no_object(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "new.py").write_text("y = 3\n")
    before = git(repo, "count-objects", "-v")
    C.resolve("aiter", repo, pin)
    assert git(repo, "count-objects", "-v") == before


def test_untracked_and_deleted_files_are_changes(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "new.py").write_text("y = 3\n")
    (repo / "aiter" / "old.py").unlink()
    found = C.resolve("aiter", repo, pin)
    assert [(c.path, c.status) for c in found.changes] == [("aiter/new.py", "added"), ("aiter/old.py", "deleted")]


def test_ignored_files_are_not_changes(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / ".gitignore").write_text("*.log\n")
    commit_all(repo, "ignore logs")
    (repo / "aiter" / "build.log").write_text("noise\n")
    found = C.resolve("aiter", repo, pin)
    assert [c.path for c in found.changes] == [".gitignore"]


def test_committed_work_on_top_of_the_pin_is_a_descendant(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "csrc" / "gemm.cu").write_text("// faster\n")
    commit_all(repo, "faster")
    found = C.resolve("aiter", repo, pin)
    assert (found.relation, found.route, found.reasons) == ("descendant", "wheel", ("csrc/gemm.cu",))


def test_a_checkout_behind_the_pin_is_an_ancestor(tiny_aiter):
    repo, old = tiny_aiter
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 5\n")
    pin = commit_all(repo, "the pin moved on")
    git(repo, "checkout", "-q", old)
    found = C.resolve("aiter", repo, pin)
    assert (found.relation, found.route) == ("ancestor", "overlay")


def test_a_head_unrelated_to_the_pin_warns_and_builds_the_wheel(tiny_aiter, tmp_path):
    repo, _ = tiny_aiter
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    shutil.rmtree(other / ".git")
    git(other, "init", "-q")
    foreign_pin = commit_all(other, "another history")
    found = C.resolve("aiter", repo, foreign_pin)
    assert (found.route, found.warning().split(":")[0]) == ("wheel", "warning")


def test_same_tree_same_snapshot_and_hash(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    first, second = C.resolve("aiter", repo, pin), C.resolve("aiter", repo, pin)
    assert (first.tree, first.head, first.snapshot, first.diff_hash) == (second.tree, second.head, second.snapshot, second.diff_hash)


def test_another_edit_moves_the_diff_hash(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    first = C.resolve("aiter", repo, pin)
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 3\n")
    assert C.resolve("aiter", repo, pin).diff_hash != first.diff_hash


def test_a_subfolder_resolves_to_the_work_tree_root(tiny_aiter):
    repo, pin = tiny_aiter
    assert C.resolve("aiter", repo / "aiter", pin).path == repo


def test_not_a_folder_is_bad_input(tmp_path):
    with pytest.raises(UsageError, match="not a folder"):
        C.resolve("aiter", tmp_path / "missing", AITER_PIN)


def test_not_a_git_repository_is_bad_input(tmp_path):
    (tmp_path / "aiter").mkdir()
    with pytest.raises(UsageError, match="not a git repository"):
        C.resolve("aiter", tmp_path, AITER_PIN)


def test_a_checkout_of_another_component_is_bad_input(tiny_aiter):
    repo, pin = tiny_aiter
    with pytest.raises(UsageError, match="is not a checkout of atom"):
        C.resolve("atom", repo, pin)


def test_a_component_given_twice_is_bad_input(tiny_aiter):
    repo, pin = tiny_aiter
    with pytest.raises(UsageError, match="twice"):
        C.resolve_all((f"aiter={repo}", f"aiter={repo}"), {"aiter": pin, "atom": pin})


# ---- the real aiter at the pin, one line edited -------------------------------------------------------------

@pytest.fixture(scope="module")
def aiter_clone(tmp_path_factory) -> Path:
    """A checkout of the real aiter at the pin; sparse (the top level and aiter/: what the edit touches), for speed.
    Its .git is a copy of the shared aiter.git (writable_copy says why not `git clone`)."""
    dest = tmp_path_factory.mktemp("real") / "aiter"
    writable_copy("aiter.git", dest / ".git")
    git(dest, "config", "core.bare", "false")
    git(dest, "sparse-checkout", "set", "aiter")
    git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", AITER_PIN)
    return dest


@pytest.fixture
def real_edit(aiter_clone):
    """aiter/tuned_gemm.py with one line added; restored after the test."""
    target = aiter_clone / "aiter" / "tuned_gemm.py"
    original = target.read_bytes()
    target.write_bytes(original + b"# a developer's one-line edit\n")
    yield aiter_clone
    target.write_bytes(original)


def test_real_aiter_one_line_edit_is_an_overlay_of_one_file(real_edit):
    found = C.resolve("aiter", real_edit, AITER_PIN)
    assert [(c.path, c.status, found.route) for c in found.changes] == [("aiter/tuned_gemm.py", "modified", "overlay")]


def test_real_aiter_main_is_a_descendant_of_the_pin(aiter_clone):
    assert C.relation(aiter_clone, AITER_HEAD, AITER_PIN) == "descendant"


def test_real_aiter_pin_is_an_ancestor_of_main(aiter_clone):
    assert C.relation(aiter_clone, AITER_PIN, AITER_HEAD) == "ancestor"


# ---- the plan -------------------------------------------------------------------------------------------------

def plan_with(*src: C.Checkout) -> P.Plan:
    return P.make_plan(profiles.load("offline"), build_of(Arch.GFX950, ck_free=True, src=src))


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> C.Checkout:
    """An overlay checkout (the planner reads the resolved value only: its pin need not be the profile's)."""
    repo, pin = make_tiny_aiter(tmp_path_factory.mktemp("overlay") / "aiter")
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    return C.resolve("aiter", repo, pin)


def keys(plan: P.Plan) -> dict[str, str]:
    return {u.name: u.key for u in plan.units}


def test_overlay_adds_a_dev_layer_and_keeps_every_pinned_key(overlay):
    pinned, dev = keys(plan_with()), keys(plan_with(overlay))
    assert {n: k for n, k in dev.items() if n not in ("dev", "candidate")} == {
        n: k for n, k in pinned.items() if n != "candidate"}


def test_overlay_candidate_is_built_on_the_dev_layer(overlay):
    plan = plan_with(overlay)
    assert dict(plan.patch.build_args)["IMAGE"] == plan.unit("dev").image


def test_overlay_runs_the_dev_step_before_the_patches(overlay):
    steps = plan_with(overlay).steps
    assert steps[steps.index("clean") + 1] == "dev"


def test_overlay_candidate_key_names_the_dev_layer(overlay):
    assert keys(plan_with(overlay))["candidate"] != keys(plan_with())["candidate"]


def test_wheel_route_moves_only_that_component_and_what_is_above_it(overlay):
    rebuilt = replace(overlay, route="wheel")
    pinned, dev = keys(plan_with()), keys(plan_with(rebuilt))
    moved = sorted(n for n in pinned if pinned[n] != dev[n])
    assert moved == ["aiter", "candidate", "clean", "wheels"]


def test_wheel_route_fetches_the_snapshot_from_its_own_context(overlay):
    rebuilt = replace(overlay, route="wheel")
    unit = plan_with(rebuilt).unit("aiter")
    assert (dict(unit.args)["AITER_REF"], unit.context.name.endswith(f"-src-aiter-{rebuilt.snapshot[:12]}")) == (
        rebuilt.snapshot, True)


def test_the_plan_stays_pure_with_a_checkout(overlay):
    assert plan_with(overlay) == plan_with(overlay)


def test_dev_tag_is_never_a_release_tag(overlay):
    assert srcplan.dev_tag("alice", (overlay,)) == f"dev-alice-{overlay.diff_hash[:12]}"


def test_dirty_labels_name_the_head_and_the_diff(overlay):
    labels = dict(srcplan.labels((overlay,)))
    assert (labels[srcplan.DIRTY_LABEL], labels["io.atom-build.src.aiter.head"], labels[srcplan.DIFF_LABEL]) == (
        "true", overlay.head, overlay.diff_hash)


def test_overlay_manifest_lists_copies_and_deletions(tiny_aiter):
    repo, pin = tiny_aiter
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    (repo / "aiter" / "old.py").unlink()
    manifest = srcplan.overlay_manifest((C.resolve("aiter", repo, pin),))
    assert ([f for f, _ in manifest["files"]], manifest["deleted"]) == (["aiter/tuned_gemm.py"], ["aiter/old.py"])


# ---- the CLI: `invoke plan --src` in-process ------------------------------------------------------------------

def invoke_plan(*argv: str) -> Program:
    return Program(namespace=tasks.ns, version="test").run(["invoke", "plan", "--arch", "gfx950", "--ck-free", *argv])


@pytest.mark.parametrize("value,needle", [
    ("torch=/tmp", "error: --src names component 'torch'"), ("aiter", "error: --src 'aiter' is not COMPONENT=PATH"),
    ("aiter=/no/such/folder", "error: --src aiter=/no/such/folder: not a folder"),
])
def test_plan_with_a_bad_src_is_one_line_and_exit_2(capsys, monkeypatch, value, needle):
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)
    with pytest.raises(SystemExit) as info:
        invoke_plan("--src", value)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert (info.value.code, len(lines), lines[0].startswith(needle)) == (2, 1, True), lines


def test_plan_json_says_the_route_and_the_files_that_decided_it(capsys, monkeypatch, real_edit, no_engine):
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)
    invoke_plan("--profile", "offline", "--src", f"aiter={real_edit}", "--json")
    src = json.loads(capsys.readouterr().out)["src"][0]
    assert (src["route"], src["decided_by"], src["why"].split(":")[0]) == ("overlay", ["aiter/tuned_gemm.py"], "overlay")
