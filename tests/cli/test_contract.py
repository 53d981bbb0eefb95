"""The CLI contract (issue 21): for every task and flag README documents, the exit code and the one line.

In-process through atom-build's Program (cleanbuild.cli.program.AtomBuild) or the module's main; a subprocess only
for what a process proves (the console script's entry point, /dev/full as fd 1, SIGINT). Every bad-input case must be decided before the engine: the engine client is replaced by one that fails.
Trees that must not change are hashed before and after. README's codes: 0 ok, 1 a result is wrong, 2 bad input,
3 the host cannot, 130 interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from cleanbuild.cli import validate as validate_cli
from cleanbuild.cli.collection import ns
from cleanbuild.cli.program import AtomBuild
from cleanbuild.commands import build
from cleanbuild.core import engine
from cleanbuild.upstream import lock, pins
from patches import cli as patches_cli
from tests.support.upstream import AITER_HEAD, AITER_PR_HEAD

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    """Every case below is decided before any engine call, pull or fetch of an image."""

    def refuse():
        raise AssertionError("the engine was contacted before the inputs were checked")

    monkeypatch.setattr(engine, "client", refuse)
    monkeypatch.delenv("INVOKE_RUNTIME_CONFIG", raising=False)


def outcome(capsys, *argv: str) -> tuple[int, list[str]]:
    """(exit code, non-empty stderr lines) of `atom-build ARGV` through its Program."""
    with pytest.raises(SystemExit) as info:
        AtomBuild().run(["atom-build", *argv])
    err = capsys.readouterr().err
    return info.value.code, [line for line in err.splitlines() if line.strip()]


def succeeds(capsys, *argv: str) -> tuple[str, str]:
    """(stdout, stderr) of `atom-build ARGV`, which must end without an exit code (invoke's success)."""
    AtomBuild().run(["atom-build", *argv])
    captured = capsys.readouterr()
    return captured.out, captured.err


def tree_hash(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sets(mapping: dict[str, str]) -> list[str]:
    return [x for key, value in mapping.items() for x in ("--set", f"{key}={value}")]


# ---- bad input: exit 2, one line, before any engine call ----------------------------------------------------------

REF_OPTION = "--upload-pack=touch /tmp/atom-build-contract-pwned"
BAD_INPUT = [
    (("plan", "--nosuch"), "error: the command line failed to parse because No idea what '--nosuch' is!"),
    (("plan", "--arch"), "error: the command line failed to parse because Flag <Argument: arch> needed value"),
    (("arch", "--arch", "gfx1100"), "error: architecture 'gfx1100' is not supported"),
    (("plan", "--arch", "gfx942", "--profile", "nope"), "error: profile 'nope' not found"),
    (("wheels", "--arch", "gfx942", "--registry", "Not A Registry"),
     "error: --registry 'Not A Registry' is not a valid image repository prefix"),
    (("clean", "--arch", "gfx942", "--progress", "loud"), "error: --progress 'loud' is not one of"),
    (("build-clean", "--arch", "gfx942", "--gpu", ""), "error: --gpu '' names no GPU."),
    (("build-clean", "--arch", "gfx942", "--gpu", ","), "error: --gpu ',' names no GPU."),
    (("build-clean", "--arch", "gfx942", "--gpu", "0,x"), "error: --gpu '0,x' is not a list of GPU indices"),
    (("build-clean", "--arch", "gfx942", "--user-id", "1:2:3"), "error: --user-id '1:2:3' is not UID or UID:GID."),
    (("build-clean", "--arch", "gfx942", "--user-id", "alice"), "error: --user-id 'alice' is not UID or UID:GID."),
    (("smoke", "--image", "Bad Ref!", "--model", "/"), "error: smoke IMAGE 'Bad Ref!' is not an image reference."),
    (("tag", "--image", "-rf"), "error: tag IMAGE '-rf' is not an image reference."),
    (("patch", "--image", "UPPER/case:x"), "error: --image 'UPPER/case:x' is not an image reference."),
    (("patch", "--folder", "/", "--only", "no-such-patch"),
     "error: patch --folder / --only no-such-patch refused because unknown patch no-such-patch"),
    (("promote", "not a ref!"), "error: promote REF 'not a ref!' is not an image reference."),
    (("promote", "registry.example:5000/atom-build/candidate@sha256:abc"),
     "error: promote REF 'registry.example:5000/atom-build/candidate@sha256:abc' is not an image reference."),
    (("promote", "registry.example:5000/atom-build/candidate:x", "--arch", "gfx1100"),
     "error: architecture 'gfx1100' is not supported"),
    (("promote", "registry.example:5000/atom-build/candidate:x", "--gpu", ","), "error: --gpu ',' names no GPU."),
    (("promote", "registry.example:5000/atom-build/candidate:x", "--user-id", "0:x"),
     "error: --user-id '0:x' is not UID or UID:GID."),
    (("audit", "BAD!"), "error: audit IMAGE 'BAD!' is not an image reference."),
    (("audit", "any:image", "--arch", "gfx90a"), "error: architecture 'gfx90a' is not supported"),
    (("audit", "--", "--format"), "error: the command line failed to parse because"),
    (("report", "no-such-tag"), "error: no report for no-such-tag."),
    (("pins", "--to", AITER_HEAD), "error: --to only means something with --bump."),
    (("pins", "--dry-run"), "error: --dry-run only means something with --bump."),
    (("lock", "--check", "--upgrade-package", "numpy"), "error: --check writes nothing, so --upgrade-package"),
    (("plan", "--arch", "gfx942", "--set", f"components.aiter.ref={REF_OPTION}"),
     "error: components.aiter.ref (profile "),
    (("pins", "--set", "components.aiter.repo=--upload-pack=touch /tmp/x"), "error: components.aiter.repo (profile "),
    (("pins", "--set", "components.atom.repo=ext::sh -c touch% /tmp/x"), "error: components.atom.repo (profile "),
    (("plan", "--arch", "gfx942", "--set", "components.torch.version=2.11.0-not!"),
     "error: components.torch.version (profile "),
    (("plan", "--arch", "gfx942", "--set", "base.digest=sha256:abc"), "error: base.digest (profile "),
    (("plan", "--arch", "gfx942", "--profile", "/no/such/profile.toml"),
     "error: profile file /no/such/profile.toml does not exist or is not a file."),
    (("plan", "--arch", "gfx942", "--builder", "--x"), "error: --builder '--x' is not a buildx builder name."),
    (("plan", "--arch", "gfx942", "--ca-bundle", str(ROOT / "README.md")),
     f"error: --ca-bundle {ROOT / 'README.md'} holds no PEM certificate."),
    (("plan", "--arch", "gfx942", "--set", "python=3.x"), "error: python (profile "),
    (("patch", "--folder", "/"), "error: patch --folder / --only - refused because --root / holds neither aiter/ nor atom/"),
]


@pytest.mark.parametrize("argv,line", BAD_INPUT, ids=[" ".join(a)[:60] for a, _ in BAD_INPUT])
def test_bad_input_is_exit_2_and_one_line(capsys, argv, line):
    code, lines = outcome(capsys, *argv)
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(line), lines[0]


def test_a_bad_registry_in_invoke_yaml_is_blamed_on_that_key(capsys, tmp_path):
    conf = tmp_path / "site.yaml"
    conf.write_text("cleanbuild:\n  registry: Not/A Registry\n")
    code, lines = outcome(capsys, "-f", str(conf), "plan", "--arch", "gfx942")
    assert (code, lines) == (2, ["error: invoke.yaml: cleanbuild.registry 'Not/A Registry' is not a valid image "
                                 "repository prefix (host[:port]/path, lower case). To fix, correct invoke.yaml: "
                                 "cleanbuild.registry."])


def test_a_profile_inheriting_a_missing_profile_names_both(capsys, tmp_path):
    orphan = tmp_path / "orphan.toml"
    orphan.write_text('inherits = "no-such-parent"\nname = "orphan"\n')
    code, lines = outcome(capsys, "plan", "--arch", "gfx942", "--profile", str(orphan))
    assert (code, len(lines)) == (2, 1)
    assert lines[0].startswith(f"error: profile {orphan} inherits 'no-such-parent', which is neither a file beside "
                               "it nor a built-in profile")


def test_a_ref_that_is_a_git_option_never_reaches_git(capsys, tmp_path, upstream_sets):
    witness = tmp_path / "pwned"
    code, lines = outcome(capsys, "pins", "--profile", "offline", *sets(upstream_sets), "--bump", "aiter",
                          "--to", f"--upload-pack=touch {witness}")
    assert (code, len(lines)) == (2, 1)
    assert lines[0].startswith(f"error: --to '--upload-pack=touch {witness}' is not a commit SHA or a git ref name")
    assert not witness.exists()


def test_a_pull_request_commit_is_refused_by_bump(capsys, upstream_sets):
    code, lines = outcome(capsys, "pins", "--profile", "offline", *sets(upstream_sets), "--bump", "aiter",
                          "--to", AITER_PR_HEAD, "--dry-run")
    assert (code, lines) == (2, [f"error: pins --bump aiter refused: {AITER_PR_HEAD[:12]} is only on "
                                 "refs/pull/4465/head. To fix, pin the commit that landed on main "
                                 "(`invoke pins --bump aiter --to SHA`)."])


def test_a_commit_the_reachable_repository_lacks_is_not_found(capsys, upstream_sets):
    code, lines = outcome(capsys, "pins", "--profile", "offline", *sets(upstream_sets), "--bump", "aiter",
                          "--to", "no-such-branch", "--dry-run")
    assert (code, len(lines)) == (2, 1)
    assert "no-such-branch" in lines[0] and "not a commit of" in lines[0]


def test_upgrading_a_package_the_lock_does_not_hold_is_refused(capsys, profile_dir, upstream_sets):
    code, lines = outcome(capsys, "lock", "--profile", str(profile_dir / "offline.toml"), *sets(upstream_sets),
                          "--upgrade-package", "no-such-package")
    assert (code, lines) == (2, ["error: --upgrade-package no-such-package: the locks of offline hold no such "
                                 "package. To fix, name a package listed in its .lock or .build.lock file."])


def test_an_invalid_version_in_set_is_one_line(capsys, profile_dir, upstream_sets):
    code, lines = outcome(capsys, "lock", "--profile", str(profile_dir / "offline.toml"), *sets(upstream_sets),
                          "--set", "components.torch.version=not a version")
    assert (code, len(lines)) == (2, 1)
    assert lines[0] == (f"error: components.torch.version (profile {profile_dir / 'offline.toml'} or --set) "
                        "'not a version' is not a version (PEP 440). To fix, write it as the index lists it, e.g. "
                        "2.11.0+rocm7.2.")


def validate(capsys, *argv: str) -> tuple[int, str]:
    """`nox -s validate -- ARGV`: cleanbuild.cli.validate, the atom-build validate task."""
    with pytest.raises(SystemExit) as info:
        validate_cli.main(list(argv))
    return info.value.code, capsys.readouterr().err


def test_validate_cli_checks_the_image_before_the_engine(capsys):
    code, err = validate(capsys, "--image", "Bad Ref!")
    assert code == 2 and err.startswith("error: validate IMAGE 'Bad Ref!' is not an image reference.")


def test_validate_cli_refuses_an_empty_gpu_list(capsys):
    code, err = validate(capsys, "--image", "atom-build/clean:x", "--gpu", ",")
    assert code == 2 and err.startswith("error: --gpu ',' names no GPU.")


def test_validate_cli_refuses_a_user_that_is_not_numeric(capsys):
    code, err = validate(capsys, "--image", "atom-build/clean:x", "--user-id", "1:2:3")
    assert code == 2 and err.startswith("error: --user-id '1:2:3' is not UID or UID:GID.")


def test_validate_cli_has_no_user_alias_for_user_id(capsys):
    """--user is the release tag's user in every task; in validate it is no flag at all."""
    code, err = validate(capsys, "--image", "atom-build/clean:x", "--user", "1000")
    assert code == 2 and err.startswith("error: the command line failed to parse because No idea what '--user' is!")


def test_a_command_nobody_expected_to_fail_is_one_line_exit_3(capsys, monkeypatch):
    from cleanbuild.core import run

    def failing(*_args, **_kwargs):
        raise run.CommandFailed(run.Result(("git", "init"), 128, "", "fatal: cannot mkdir: Read-only file system"))

    monkeypatch.setattr(build, "arch_info", failing)
    code, lines = outcome(capsys, "arch", "--arch", "gfx942")
    assert (code, lines) == (3, ["error: running git init exited 128: fatal: cannot mkdir: Read-only file system "
                                 "failed. To fix, read the command's own message above (--debug shows where it was "
                                 "run from)."])


# ---- corrupt files: exit 2 naming the file (3 for a corrupt git object: the host cannot read it) ------------------

def test_a_binary_lock_is_named(capsys, profile_dir):
    (profile_dir / "offline.lock").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe binary")
    code, lines = outcome(capsys, "lock", "--check", "--profile", str(profile_dir / "offline.toml"))
    assert (code, lines) == (2, [f"error: {profile_dir / 'offline.lock'} is not a text lock file (not UTF-8). To fix, "
                                 "restore it from git or remake it with `invoke lock`."])


def test_a_lock_with_a_corrupt_header_is_named(capsys, profile_dir):
    text = (profile_dir / "offline.lock").read_text()
    (profile_dir / "offline.lock").write_text(text.replace('{"aiter"', '{aiter', 1))
    code, lines = outcome(capsys, "lock", "--check", "--profile", str(profile_dir / "offline.toml"))
    assert (code, len(lines)) == (2, 1)
    assert lines[0].startswith(f"error: {profile_dir / 'offline.lock'}: its atom-build-lock header is not a JSON object.")


def test_a_truncated_profile_is_named(capsys, profile_dir):
    offline = profile_dir / "offline.toml"
    offline.write_bytes(offline.read_bytes()[:-40].rsplit(b"\n", 1)[0] + b'\n[components.atom\nrepo = "')
    code, lines = outcome(capsys, "plan", "--arch", "gfx942", "--profile", str(offline))
    assert (code, len(lines)) == (2, 1)
    assert lines[0].startswith(f"error: profile {offline} is not valid TOML (")


@pytest.fixture
def corrupt_repo(tmp_path) -> tuple[Path, str]:
    """(repository, commit): one commit on main, its objects loose, its root tree object garbage on disk."""
    work = tmp_path / "corrupt"
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)  # noqa: S603,S607
    (work / "setup.py").write_text("print('x')\n")
    subprocess.run([*git, "add", "."], check=True)  # noqa: S603
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)  # noqa: S603
    sha, tree = subprocess.run([*git, "rev-parse", "main", "main^{tree}"], check=True, capture_output=True,  # noqa: S603
                               text=True).stdout.split()
    obj = work / ".git" / "objects" / tree[:2] / tree[2:]
    obj.chmod(0o644)
    obj.write_bytes(zlib.compress(b"tree 99\x00garbage"))
    return work, sha


def test_a_corrupt_git_object_is_one_line_and_exit_3(capsys, monkeypatch, corrupt_repo, upstream_sets):
    bare, sha = corrupt_repo
    monkeypatch.setattr(pins, "_json", lambda url: None)  # PyPI: unchecked, not the subject here
    monkeypatch.setattr(pins, "_text", lambda url: None)
    code, lines = outcome(capsys, "pins", "--profile", "offline", *sets(upstream_sets),
                          *sets({"components.aiter.repo": str(bare), "components.aiter.ref": sha}))
    failed = [line for line in lines if line.startswith("error: ")]
    assert (code, len(failed)) == (3, 1), lines
    assert failed[0].startswith(f"error: git archive in {bare} failed because ")
    assert "Traceback" not in "\n".join(lines)


def test_debug_shows_the_traceback_of_a_translated_error(capsys, profile_dir):
    (profile_dir / "offline.lock").write_bytes(b"\xff\xfe")
    with pytest.raises(SystemExit) as info:
        AtomBuild().run(["atom-build", "lock", "--check", "--debug", "--profile",
                                                   str(profile_dir / "offline.toml")])
    assert info.value.code == 2 and "Traceback" in capsys.readouterr().err


# ---- read-only trees (a read-only bind mount: root ignores chmod) -------------------------------------------------

@pytest.fixture
def read_only(tmp_path):
    """mount(folder): folder becomes a read-only bind mount of itself until the test ends."""
    mounted: list[Path] = []

    def mount(folder: Path) -> Path:
        for argv in (["mount", "--bind", str(folder), str(folder)],
                     ["mount", "-o", "remount,ro,bind", str(folder)]):
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
            if proc.returncode != 0:
                if mounted or argv[1] == "-o":
                    subprocess.run(["umount", str(folder)], check=False)  # noqa: S603,S607
                if CI and os.geteuid() == 0:  # CI's root run proves it; its non-root run skips
                    pytest.fail(f"CI=true and a read-only bind mount failed: {proc.stderr.strip()}", pytrace=False)
                pytest.skip(f"a read-only bind mount is impossible here (it needs root): {proc.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)  # noqa: S603,S607


@pytest.fixture
def quick_compile(monkeypatch):
    """uv's resolution replaced by fixed texts: these tests are about the write, not the resolver."""
    monkeypatch.setattr(lock, "compile_lock", lambda inp, **_: ("# new runtime lock\n", "# new build lock\n"))


def test_lock_in_a_read_only_tree_is_exit_3_and_changes_nothing(capsys, profile_dir, upstream_sets, read_only,
                                                                quick_compile):
    before = tree_hash(profile_dir)
    read_only(profile_dir)
    code, lines = outcome(capsys, "lock", "--profile", str(profile_dir / "offline.toml"), *sets(upstream_sets))
    assert (code, len(lines)) == (3, 1), lines
    assert lines[0] == (f"error: reading or writing {profile_dir / 'offline.lock'} failed because Read-only file "
                        "system. To fix, run it from a writable checkout (this file system is mounted read-only).")
    assert tree_hash(profile_dir) == before


def test_pins_bump_in_a_read_only_tree_is_exit_3_and_changes_nothing(capsys, profile_dir, upstream_sets, read_only,
                                                                     quick_compile):
    before = tree_hash(profile_dir)
    read_only(profile_dir)
    code, lines = outcome(capsys, "pins", "--profile", str(profile_dir / "offline.toml"), *sets(upstream_sets),
                          "--bump", "aiter", "--to", AITER_HEAD)
    failed = [line for line in lines if line.startswith("error: ")]
    assert (code, len(failed)) == (3, 1), lines
    assert "Read-only file system" in failed[0]
    assert tree_hash(profile_dir) == before


def unpatched_site(tmp_path: Path) -> Path:
    """A site-packages folder holding one unpatched aiter/tuned_gemm.py (the hand-written fixture)."""
    root = tmp_path / "site"
    target = root / "aiter" / "tuned_gemm.py"
    target.parent.mkdir(parents=True)
    target.write_bytes((ROOT / "tests" / "patches" / "fixtures" / "aiter" / "tuned_gemm_new.before.py.txt").read_bytes())
    return root


def test_patches_apply_in_a_read_only_tree_is_exit_3_not_drift(capsys, tmp_path, read_only):
    root = unpatched_site(tmp_path)
    before = tree_hash(root)
    read_only(root)
    assert patches_cli.main(["apply", "--root", str(root)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == ["patches: error: could not write aiter/tuned_gemm.py (Read-only file system); nothing was changed"]
    assert tree_hash(root) == before


def test_invoke_patch_tells_a_write_failure_from_drift(capsys, tmp_path, read_only):
    root = unpatched_site(tmp_path)
    read_only(root)
    code, lines = outcome(capsys, "patch", "--folder", str(root))
    assert (code, lines[-1]) == (3, f"error: patches apply failed because it could not write under {root} (see "
                                    "above); nothing was changed. To fix, make the folder writable and give it disk "
                                    "space.")


# ---- what only a process shows: the real entry point, a full device, SIGINT ---------------------------------------

def invoke(*args: str, env: dict | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from cleanbuild.cli.main import main; main()", *args], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE,  # noqa: S603
                          text=True, timeout=120, env={**os.environ, **(env or {})}, check=False)


@pytest.mark.parametrize("argv", [("plan", "--nosuch"), ("plan", "--arch"), ("pins", "--bump")])
def test_the_console_script_exits_2_on_its_own_parse_errors(argv):
    result = invoke(*argv)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith("error: the command line failed to parse because ")


def test_invoke_runtime_config_naming_a_folder_is_one_line_exit_2(tmp_path):
    result = invoke("arch", "--arch", "gfx942", env={"INVOKE_RUNTIME_CONFIG": str(tmp_path)})
    assert (result.returncode, result.stderr) == (2, f"error: the site config {tmp_path} is a folder, not a YAML "
                                                     "file. To fix, name an invoke.yaml file (-f FILE or "
                                                     "INVOKE_RUNTIME_CONFIG=FILE) or unset it.\n")


def test_json_to_a_full_device_is_one_line_exit_3():
    with open("/dev/full", "w") as full:
        result = invoke("arch", "--arch", "gfx942", "--json", stdout=full)
    assert (result.returncode, result.stderr) == (3, "error: writing to standard output failed because No space "
                                                     "left on device. To fix, send the output to a file or a device "
                                                     "with space (or a pipe that stays open).\n")


def test_patches_to_a_full_device_is_one_line_exit_3():
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "patches", "list"], cwd=ROOT, stdout=full,  # noqa: S603
                                stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    assert (result.returncode, result.stderr) == (3, "patches: error: writing to standard output failed because No "
                                                     "space left on device (to fix, send the output to a file or a "
                                                     "device with space)\n")


SIGINT_CHILD = """
import os, sys, time
from pathlib import Path
from cleanbuild.cli.program import AtomBuild
from cleanbuild.upstream import lock
lock.compile_lock = lambda inp, **_: ("# new runtime lock\\n", "# new build lock\\n")
marker, phase = Path(sys.argv[1]), sys.argv[2]
real = {"fsync": os.fsync, "replace": os.replace}
calls = []
def pause(name):
    def call(*args):
        calls.append(name)
        result = real[name](*args)
        if len([c for c in calls if c == name]) == 1:
            marker.write_text("ready")
            sent = marker.with_name("sent")
            for _ in range(600):  # SIGINT arrives here; a held SIGINT does not end the wait, the parent's note does
                if sent.exists():
                    break
                time.sleep(0.05)
        return result
    return call
setattr(os, phase, pause(phase))
AtomBuild().run(["atom-build", *sys.argv[3:]])
"""


def interrupt(tmp_path, phase: str, task_argv: list[str]) -> tuple[int, str]:
    """Run `atom-build TASK_ARGV` in a child whose first os.<phase> call pauses; SIGINT it there."""
    marker = tmp_path / "ready"
    argv = [sys.executable, "-c", SIGINT_CHILD, str(marker), phase, *task_argv]
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:  # noqa: S603
        deadline = time.monotonic() + 120
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the signal is handled (held or raised) before the child reads the note
        (tmp_path / "sent").write_text("sent")
        _, err = child.communicate(timeout=60)
    return child.returncode, err


PHASES = pytest.mark.parametrize("phase,changed", [("fsync", False), ("replace", True)],
                                 ids=["while-staging", "between-the-renames"])


@PHASES
def test_ctrl_c_during_the_lock_write_leaves_both_locks_old_or_both_new(tmp_path, profile_dir, upstream_sets, phase,
                                                                        changed):
    """Ctrl-C while the temporary files are written: nothing changed. Ctrl-C between the two renames: held back
    until the pair is complete. Never one new lock beside an old one; exit 130 either way."""
    before = tree_hash(profile_dir)
    code, err = interrupt(tmp_path, phase, ["lock", "--profile", str(profile_dir / "offline.toml"),
                                            *sets(upstream_sets)])
    after = tree_hash(profile_dir)
    moved = {name for name in before if before[name] != after.get(name)}
    assert (code, err.splitlines()[-1]) == (130, "error: interrupted"), err
    assert moved == ({"offline.lock", "offline.build.lock"} if changed else set())
    assert sorted(after) == sorted(before)  # no temporary or backup file left behind


@PHASES
def test_ctrl_c_during_a_bump_leaves_profile_and_locks_old_or_all_new(tmp_path, profile_dir, upstream_sets, phase,
                                                                      changed):
    """pins --bump writes the defining profile and the locks of it and its heir as one set (issue 20)."""
    before = tree_hash(profile_dir)
    code, err = interrupt(tmp_path, phase, ["pins", "--profile", str(profile_dir / "offline.toml"),
                                            *sets(upstream_sets), "--bump", "aiter", "--to", AITER_HEAD])
    after = tree_hash(profile_dir)
    moved = {name for name in before if before[name] != after.get(name)}
    every = {"default.toml", "default.lock", "default.build.lock", "offline.lock", "offline.build.lock"}
    assert (code, err.splitlines()[-1]) == (130, "error: interrupted"), err
    assert moved == (every if changed else set())
    assert sorted(after) == sorted(before)


# ---- help text: one meaning per flag, no nameless flag ----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ns.task_names))
def test_help_lists_no_short_flag_and_no_nameless_flag(capsys, name):
    with pytest.raises(SystemExit):
        AtomBuild().run(["atom-build", "--help", name])
    options = capsys.readouterr().out.split("Options:", 1)[-1]
    flags = [line.split()[0] for line in options.splitlines() if line.strip().startswith("-")]
    assert flags and all(flag.startswith("--") and flag[2:3].isalpha() for flag in flags), flags


# ---- nox -s validate keeps the exit code ----------------------------------------------------------------------------

class FailingSession:
    def __init__(self, code: int):
        self.code = code

    def run(self, *argv: str) -> None:
        import nox

        raise nox.command.CommandFailed(f"Returned code {self.code}", return_code=self.code)


@pytest.mark.parametrize("code", [2, 3, 4, 130])
def test_nox_validate_passes_the_command_exit_code_through(code):
    import noxfile

    with pytest.raises(SystemExit) as info:
        noxfile._run_keeping_code(FailingSession(code), "python", "-m", "cleanbuild.cli.validate")
    assert info.value.code == code


def test_nox_validate_leaves_a_wrong_result_to_nox_as_exit_1():
    import nox

    import noxfile

    with pytest.raises(nox.command.CommandFailed):
        noxfile._run_keeping_code(FailingSession(1), "python", "-m", "cleanbuild.cli.validate")


# ---- issue 32: every input checked before the first effect ------------------------------------------------------

LATE_INPUT = [
    (("audit", "any:image", "--report", "/proc/nope"),
     "error: --report /proc/nope cannot be written because a new file in /proc was refused (No such file or "
     "directory). To fix, check the path"),
    (("audit", "any:image", "--report", str(ROOT / "README.md")), f"error: --report {ROOT / 'README.md'} is a file, "
                                                                   "not a folder."),
    (("wheels", "--arch", "gfx942", "--profile", "offline", "--export", str(ROOT), "--dry-run"),
     f"error: --export {ROOT} exists and is not empty."),
    (("wheels", "--arch", "gfx942", "--profile", "offline", "--export", "/proc/nope/wheels", "--dry-run"),
     "error: --export /proc/nope/wheels cannot be written because a new file in /proc was refused"),
    (("report", "../../x"), "error: report REF '../../x' is not an image reference."),
    (("report", ".."), "error: report REF '..' is not an image tag."),
    (("report", "atom-gfx942:../../../etc/passwd"), "error: report REF 'atom-gfx942:../../../etc/passwd' is not an "
                                                   "image reference."),
    (("plan", "--arch", "gfx942", "--profile", "../../../tmp/evil"),
     "error: profile name '../../../tmp/evil' is not a profile name."),
    (("wheels", "--arch", "gfx942", "--registry", "localhost:99999/x", "--dry-run"),
     "error: --registry 'localhost:99999/x' names a port outside 1-65535."),
    (("build-clean", "--arch", "gfx942", "--registry", "localhost:0", "--dry-run"),
     "error: --registry 'localhost:0' names a port outside 1-65535."),
    (("promote", "localhost:99999/atom-build/candidate:x"),
     "error: promote REF 'localhost:99999/atom-build/candidate:x' is not an image reference."),
    (("pins", "--bump", ""), "error: --bump '': components. is not a git pin. To fix, bump one of: aiter, atom."),
]


@pytest.mark.parametrize("argv,line", LATE_INPUT, ids=[" ".join(a)[:60] for a, _ in LATE_INPUT])
def test_outputs_names_and_ports_are_refused_before_any_effect(capsys, argv, line):
    code, lines = outcome(capsys, *argv)
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(line), lines[0]


@pytest.mark.parametrize("task", ["build-clean", "wheels", "clean"])
@pytest.mark.parametrize("bad,line", [
    ({"components.aiter.ref": "zzz"}, "error: components.aiter.ref 'zzz' is not a commit, branch or tag of "),
    ({"components.atom.ref": AITER_HEAD}, f"error: components.atom.ref '{AITER_HEAD}' is not a commit, branch or tag"),
    ({"components.aiter.repo": "/no/such/aiter.git"}, "error: repository /no/such/aiter.git (/no/such/aiter.git) is "
                                                      "not a git repository."),
], ids=["unknown-ref", "commit-of-another-repo", "missing-repository"])
def test_a_dry_run_refuses_what_the_build_refuses(capsys, upstream_sets, task, bad, line):
    code, lines = outcome(capsys, task, "--arch", "gfx942", "--profile", "offline", *sets({**upstream_sets, **bad}),
                          "--dry-run")
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(line), lines[0]


def test_a_dry_run_of_pins_that_resolve_plans(capsys, monkeypatch, upstream_sets):
    def no_engine_here():
        raise engine.EnvironmentProblem("no engine in this test")  # the plan says "unknown" for each image

    monkeypatch.setattr(engine, "client", no_engine_here)
    out, _ = succeeds(capsys, "build-clean", "--arch", "gfx942", "--profile", "offline", *sets(upstream_sets),
                      "--dry-run")
    assert "docker buildx build" in out


# ---- one resolution path: plan answers what build-clean --dry-run (and the build, through plans()) answers -------

ONE_ANSWER = [
    (("--arch", "gfx950", "--set", "components.aiter.ref=zzz"), {},
     "error: components.aiter.ref 'zzz' is not a commit, branch or tag of "),
    (("--arch", "gfx950", "--mirror", "/no/such/mirror"), {}, "error: --mirror /no/such/mirror is not a folder."),
    (("--arch", "gfx950"), {"ATOM_BUILD_MIRROR": "/no/such/mirror"},
     "error: $ATOM_BUILD_MIRROR /no/such/mirror is not a folder."),
    (("--arch", "gfx950", "--mirror", "{empty}"), {},
     "error: --mirror {empty} has no aiter.git, the copy of https://github.com/ROCm/aiter.git."),
    (("--arch", "gfx950", "--set", "oops"), {}, "error: --set 'oops' is not KEY=VALUE."),
    (("--arch", "gfx1100"), {}, "error: architecture 'gfx1100' is not supported."),
]
ONE_ANSWER_IDS = ["bad-ref", "missing-mirror-flag", "missing-mirror-env", "mirror-without-copies", "malformed-set",
                  "unknown-arch"]
PLAN_AND_DRY_RUN = (("plan",), ("build-clean", "--dry-run"))


@pytest.mark.parametrize("args,env,line", ONE_ANSWER, ids=ONE_ANSWER_IDS)
def test_plan_refuses_what_the_dry_run_refuses_with_the_same_line(capsys, monkeypatch, upstream, tmp_path, args, env,
                                                                   line):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = [a.format(empty=tmp_path) for a in ("--profile", "offline", *args)]
    answers = [outcome(capsys, *task, *argv) for task in PLAN_AND_DRY_RUN]
    assert answers[0] == answers[1]
    code, lines = answers[0]
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(line.format(empty=tmp_path)), lines[0]


def plain_invoke(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    result = subprocess.run([sys.executable, "-m", "invoke", *argv], cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                            timeout=120, env={**os.environ, **env}, check=False)
    return result.returncode, result.stderr


@pytest.mark.parametrize("args,env,line", [ONE_ANSWER[0], ONE_ANSWER[2]], ids=["bad-ref", "missing-mirror-env"])
def test_both_front_doors_give_plan_and_the_dry_run_one_answer(capsys, monkeypatch, upstream, args, env, line):
    """Plain `invoke` in a process (its own Program), atom-build in-process: four runs, one line, one exit code."""
    argv = ("--profile", "offline", *args)
    answers = {plain_invoke(*task, *argv, env=env) for task in PLAN_AND_DRY_RUN}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for task in PLAN_AND_DRY_RUN:
        code, lines = outcome(capsys, *task, *argv)
        answers.add((code, "".join(f"{x}\n" for x in lines)))
    assert len(answers) == 1, answers
    code, err = answers.pop()
    assert (code, err.startswith(line)) == (2, True), err


def test_plan_and_the_dry_run_agree_on_a_good_input(capsys, monkeypatch, upstream):
    def no_engine_here():
        raise engine.EnvironmentProblem("no engine in this test")  # each image's state: unknown

    monkeypatch.setattr(engine, "client", no_engine_here)
    outputs = [succeeds(capsys, *task, "--profile", "offline", "--arch", "gfx950")[0] for task in PLAN_AND_DRY_RUN]
    builds = [[line for line in out.splitlines() if line.startswith("docker buildx build ")] for out in outputs]
    assert builds[0] and builds[0] == builds[1]


def test_validate_refuses_an_unwritable_json_before_the_engine(capsys, tmp_path, read_only):
    image = "atom-build/clean:x"
    code, lines = outcome(capsys, "validate", image, "--json-file", "/proc/nope/x.json")
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith("error: --json-file /proc/nope/x.json cannot be written because a new file in /proc "
                               "was refused")
    code, lines = outcome(capsys, "validate", image, "--json-file", str(tmp_path))
    assert (code, len(lines)) == (2, 1), lines
    assert lines[0].startswith(f"error: --json-file {tmp_path} is a folder.")
    read_only(tmp_path)
    code, lines = outcome(capsys, "validate", image, "--json-file", str(tmp_path / "v.json"))
    assert (code, len(lines)) == (3, 1), lines
    assert lines[0].startswith(f"error: --json-file {tmp_path / 'v.json'} cannot be written because a new file in "
                               f"{tmp_path} was refused (Read-only file system).")


def test_audit_refuses_a_read_only_report_folder_before_any_container(capsys, tmp_path, read_only):
    read_only(tmp_path)
    code, lines = outcome(capsys, "audit", "any:image", "--report", str(tmp_path / "r"))
    assert (code, len(lines)) == (3, 1), lines
    assert lines[0].startswith(f"error: --report {tmp_path / 'r'} cannot be written because a new file in "
                               f"{tmp_path} was refused (Read-only file system).")
    assert list(tmp_path.iterdir()) == []


def test_the_writability_probe_leaves_nothing(capsys, tmp_path):
    outcome(capsys, "audit", "BAD!", "--report", str(tmp_path / "r"))  # refused after the probe would have run
    code, _ = outcome(capsys, "audit", "any:image", "--arch", "gfx1100", "--report", str(tmp_path / "r"))
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_an_unreachable_validation_json_target_ends_as_one_line_not_a_traceback():
    result = subprocess.run([sys.executable, "-m", "validation", "--arch", "gfx942", "--device", "cpu", "--only",  # noqa: S603
                             "lds-budget", "--json-file", "/proc/nope/x.json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "python -m validation: error: --json-file /proc/nope/x.json: cannot write there (a new file in /proc was "
               "refused: No such file or directory)\n")


def test_a_full_validation_json_target_is_one_line_exit_3(capsys):
    """Through validation's main, in this process (`python -m validation` exits with what it returns; the test above
    runs the process): the report's write fails after the checks ran, and the run ends in one line, exit 3."""
    from validation.cli import main

    code = main(["--arch", "gfx942", "--device", "cpu", "--only", "lds-budget", "--json-file", "/dev/full"])
    err = capsys.readouterr().err
    assert (code, err.splitlines()[-1]) == (
        3, "python -m validation: error: --json-file /dev/full: writing failed (No space left on device); free space "
           "there or name another path"), err


def stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def cache_tree() -> list[tuple[str, str]]:
    """Every path under the checkout's .cache (folders too), with each file's size, modification time and inode (a
    write or a replace changes them; hashing the contents, a gigabyte on a machine that builds, would say nothing
    more). Leaves out pypi/, the wheels the test fixtures download (another worker may be filling it now), which no
    lock command writes."""
    cache = ROOT / ".cache"
    return [(str(p.relative_to(cache)), stamp(p) if p.is_file() else "dir")
            for p in sorted(cache.rglob("*")) if p.relative_to(cache).parts[0] != "pypi"] if cache.exists() else []


def test_lock_check_of_an_unreachable_repository_creates_nothing(capsys, upstream_sets, monkeypatch):
    monkeypatch.delenv("ATOM_BUILD_MIRROR", raising=False)  # the URL itself is asked, not a mirror's copy of it
    url = "https://127.0.0.1:9/no-such-aiter.git"
    before = cache_tree()
    code, lines = outcome(capsys, "lock", "--check", "--profile", "offline",
                          *sets({**upstream_sets, "components.aiter.repo": url}))
    assert (code, len(lines)) == (3, 1), lines
    assert lines[0].startswith(f"error: the offline profile failed because it cannot reach the repository {url} "
                               "because fatal: unable to access "), lines[0]
    assert cache_tree() == before


# ---- issue 32: a checkout and mirrors another user owns (a shared build host, a read-only mount) -----------------

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.fixture
def as_nobody(monkeypatch):
    """(folder): every git this process runs, runs as nobody (real git, its real ownership checks); folder is a
    fresh root-owned folder nobody may read, for mirrors. pytest's tmp_path is not reachable by nobody."""
    if os.geteuid() != 0:  # CI's root run proves it; its non-root run skips
        pytest.skip("needs root to run git as nobody")
    if subprocess.run([*NOBODY, "true"], check=False).returncode != 0:  # noqa: S603
        if CI:
            pytest.fail("CI=true and root cannot switch to nobody (needs setpriv)", pytrace=False)
        pytest.skip("needs setpriv to run git as nobody")
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="atom-build-nonowner-"))
    folder.chmod(0o755)
    wrapper = folder / "bin" / "git"
    wrapper.parent.mkdir()
    # As nobody, git starts where this process is, or at / where nobody may not enter (a checkout in a home of mode
    # 700): another user's git runs from a folder of its own, not from ours.
    git = shutil.which("git")
    as_nobody_git = shlex.join([*NOBODY, "env", f"HOME={folder}", "sh", "-c", f'cd "$0" 2>/dev/null || cd /; exec {git} "$@"'])
    wrapper.write_text(f'#!/bin/sh\nif [ "$(id -u)" = 0 ]; then exec {as_nobody_git} "$PWD" "$@"; fi\nexec {git} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    yield folder
    shutil.rmtree(folder)


def mirrors(upstream: Path, folder: Path) -> dict[str, str]:
    import shutil

    for name in ("aiter.git", "atom.git"):
        shutil.copytree(upstream / name, folder / name)
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(folder)], check=True)  # noqa: S603,S607
    return {"components.aiter.repo": str(folder / "aiter.git"), "components.atom.repo": str(folder / "atom.git")}


def test_pins_reads_mirrors_another_user_owns(capsys, monkeypatch, upstream, as_nobody):
    monkeypatch.setattr(pins, "_json", lambda url: None)  # PyPI: not the subject here
    monkeypatch.setattr(pins, "_text", lambda url: None)
    out, err = succeeds(capsys, "pins", "--profile", "offline", "--json", *sets(mirrors(upstream, as_nobody)))
    rows = {row["component"]: row["status"] for row in json.loads(out)["pins"]}
    assert (rows["aiter"], rows["atom"], rows["aiter/atom"], err) == ("ok", "ok", "ok", "")


def test_lock_check_reads_mirrors_another_user_owns(capsys, upstream, as_nobody):
    _, err = succeeds(capsys, "lock", "--check", "--profile", "offline", *sets(mirrors(upstream, as_nobody)))
    assert err == "✓ offline.lock matches the pins of offline\n"


def test_a_mirror_git_cannot_read_names_gits_own_reason(capsys, upstream, as_nobody):
    repos = mirrors(upstream, as_nobody)
    (as_nobody / "atom.git" / "refs").chmod(0o700)
    code, lines = outcome(capsys, "pins", "--profile", "offline", *sets(repos))
    atom = as_nobody / "atom.git"
    assert (code, lines[-1]) == (3, f"error: cannot reach the repository {atom} because fatal: '{atom}' does not "
                                    "appear to be a git repository. To fix, check the network or the URL (a path: "
                                    "that this user can read it).")
