"""`patches apply` writes every changed file or none (issue 11, defect 5); a write the host cannot do exits 3
(issue 21: told apart from drift, which exits 2).

A failed write (permission, full disk) used to leave the first target patched
and the second not, with an error that did not say which. Now every temp file
is written first, then all are renamed, and a failed rename puts back the
files already replaced; the one-line error names the file and the cause.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys

import pytest
from patch_helpers import JIT_CORE, REPO, TUNED_GEMM, fixture_bytes, make_root, snapshot

from patches import cli

# tuned_gemm.py is written first, jit/core.py second (catalog order).
FILES = {TUNED_GEMM: "aiter/tuned_gemm_new.before", JIT_CORE: "aiter/core_old.before"}


@pytest.fixture
def root(tmp_path):
    return make_root(tmp_path, FILES)


def apply(root, capsys) -> tuple[int, list[str]]:
    code = cli.main(["apply", "--root", str(root)])
    return code, capsys.readouterr().err.splitlines()


def fail_on_call(monkeypatch, name: str, failing: set[int], error: OSError):
    """Make os.<name> raise error on the given calls (1-based), pass through otherwise."""
    real, calls = getattr(os, name), []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) in failing:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, flaky)


def test_a_failed_rename_restores_the_file_already_replaced(root, capsys, monkeypatch):
    before = snapshot(root)
    fail_on_call(monkeypatch, "replace", {2}, PermissionError(errno.EACCES, "Permission denied"))
    code, err = apply(root, capsys)
    assert code == 3
    assert err == [
        f"patches: error: could not write {JIT_CORE} (Permission denied); "
        f"restored {TUNED_GEMM}, which had been replaced: nothing was changed"
    ]
    assert snapshot(root) == before  # no half-patched tree, no temp files left


def test_a_full_disk_while_staging_changes_nothing(root, capsys, monkeypatch):
    before = snapshot(root)
    fail_on_call(monkeypatch, "fsync", {2}, OSError(errno.ENOSPC, "No space left on device"))
    code, err = apply(root, capsys)
    assert (code, err) == (
        3,
        [f"patches: error: could not write {JIT_CORE} (No space left on device); nothing was changed"],
    )
    assert snapshot(root) == before


def test_a_failed_rollback_says_which_file_stays_patched(root, capsys, monkeypatch):
    # The second rename fails, and so does the rename that would restore the first file.
    fail_on_call(monkeypatch, "replace", {2, 3}, OSError(errno.EIO, "Input/output error"))
    code, err = apply(root, capsys)
    assert code == 3
    assert err == [
        f"patches: error: could not write {JIT_CORE} (Input/output error); "
        f"could not restore {TUNED_GEMM} (Input/output error): those files stay patched"
    ]
    assert (root / JIT_CORE).read_bytes() == fixture_bytes("aiter/core_old.before")


def test_nothing_is_written_when_a_file_is_too_large_to_write(tmp_path):
    """A real failed write through the real entry point: RLIMIT_FSIZE makes the
    second (larger) file fail with EFBIG, even for root, where permissions do not."""
    big_core = fixture_bytes("aiter/core_old.before") + b"# padding to outgrow the limit\n" * 400
    root = make_root(tmp_path, {TUNED_GEMM: FILES[TUNED_GEMM], JIT_CORE: big_core})
    before = snapshot(root)
    limit = 8 * 1024  # tuned_gemm.py patched: ~4 KiB; core.py patched: ~13 KiB
    assert len(fixture_bytes(FILES[TUNED_GEMM])) < limit < len(big_core)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(  # noqa: S603 (fixed argv)
        [sys.executable, "-m", "patches", "apply", "--root", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=small_files,  # noqa: PLW1509 (no threads in the child before exec)
    )
    assert (proc.returncode, proc.stderr.splitlines()) == (
        3,
        [f"patches: error: could not write {JIT_CORE} (File too large); nothing was changed"],
    )
    assert snapshot(root) == before


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into read-only folders; the EFBIG test covers root"
)
def test_a_read_only_folder_for_the_second_file(root, capsys):
    before = snapshot(root)
    (root / JIT_CORE).parent.chmod(0o555)
    try:
        code, err = apply(root, capsys)
    finally:
        (root / JIT_CORE).parent.chmod(0o755)
    assert (code, err) == (
        3,
        [f"patches: error: could not write {JIT_CORE} (Permission denied); nothing was changed"],
    )
    assert snapshot(root) == before
