"""docker/scripts/compile_new.py: a layer on top of another byte-compiles exactly its own distributions' files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support.scripts import load_script

cn = load_script("compile_new")


def _installed(site: Path, name: str, files: dict[str, str]) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in [*files, f"{info.name}/METADATA", "../../bin/tool"]))


def test_compile_new_compiles_only_the_named_distributions_hash_checked(tmp_path):
    site = tmp_path / "site"
    _installed(site, "Atom_Pkg", {"atom/__init__.py": "X = 1\n", "atom/sub/m.py": "Y = 2\n"})
    _installed(site, "torch", {"torch/__init__.py": "Z = 3\n"})
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("atom-pkg==1.0 --hash=sha256:00\n")
    assert cn.main([str(reqs), str(site)]) == 0
    pycs = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.pyc"))
    tag = importlib.util.cache_from_source("m.py").rsplit("/", 1)[-1]
    assert pycs == [f"atom/__pycache__/{tag.replace('m.', '__init__.')}", f"atom/sub/__pycache__/{tag}"]
    flags = int.from_bytes((site / pycs[0]).read_bytes()[4:8], "little")
    assert flags == 0b11  # hash-based, checked against the source: valid whatever the file's time


def test_a_file_that_does_not_compile_is_skipped_not_an_error(tmp_path):
    site = tmp_path / "site"
    _installed(site, "atom", {"atom/__init__.py": "X = 1\n", "atom/py2.py": "print 'old'\n"})
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("atom==1.0\n")
    assert cn.main([str(reqs), str(site)]) == 0
    assert [p.name.split(".")[0] for p in site.rglob("*.pyc")] == ["__init__"]
