"""The tier's log ends with pytest's summary: no test leaves torch an exit hook that fails after it (a traceback
there reads as a failure). test_aiter_adapter.py is the one that loads aiter's source, whose torch ops do that."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_loading_aiter_leaves_no_traceback_after_the_summary(tmp_path):
    # --basetemp: the inner run's temporary folders stay under this test's, so it never prunes the numbered
    # folders of other pytest runs (whole earlier runs' trees: that took it from 8 s to a minute).
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",  # noqa: S603
                             "--basetemp", str(tmp_path / "inner"),
                             "tests/validation/test_aiter_adapter.py"], cwd=REPO, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"}, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert " passed" in result.stdout.splitlines()[-1]
