"""docker/scripts/wheel_add_tree.py: the offline profile's hsa/ stand-in, added to a real-format wheel."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from tests.support.scripts import load_script

add = load_script("wheel_add_tree")


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("aiter/__init__.py", "")
        zf.writestr("amd_aiter-0.1.dist-info/METADATA", "Name: amd-aiter\n")
        zf.writestr("amd_aiter-0.1.dist-info/RECORD", "aiter/__init__.py,sha256=x,0\namd_aiter-0.1.dist-info/RECORD,,\n")
    return path


def _tree(root: Path) -> Path:
    (root / "gfx942" / "fmoe").mkdir(parents=True)
    (root / "gfx942" / "fmoe" / "k.co").write_bytes(b"\x7fELF" + b"\1" * 60)
    (root / "codegen.py").write_text("print()\n")
    return root


def test_the_tree_lands_under_dest_with_true_record_rows(tmp_path):
    wheel = _wheel(tmp_path / "amd_aiter-0.1-py3-none-any.whl")
    assert add.add_tree(wheel, _tree(tmp_path / "hsa"), "aiter_meta/hsa") == 2
    with zipfile.ZipFile(wheel) as zf:
        rows = zf.read("amd_aiter-0.1.dist-info/RECORD").decode().splitlines()
        data = zf.read("aiter_meta/hsa/gfx942/fmoe/k.co")
        names = zf.namelist()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert f"aiter_meta/hsa/gfx942/fmoe/k.co,sha256={digest},64" in rows
    assert rows[-1] == "amd_aiter-0.1.dist-info/RECORD,,"
    assert names[-1] == "amd_aiter-0.1.dist-info/RECORD"
    assert "aiter_meta/hsa/codegen.py" in names


def test_the_same_inputs_give_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1754179200")
    out = []
    for run in ("a", "b"):
        wheel = _wheel(tmp_path / run / "w.whl" if (tmp_path / run).mkdir() is None else None)
        tree = _tree(tmp_path / run / "hsa")
        add.add_tree(wheel, tree, "aiter_meta/hsa")
        out.append(wheel.read_bytes())
    assert out[0] == out[1]
