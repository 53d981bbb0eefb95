"""compile_new.py REQUIREMENTS SITE: byte-compile exactly the files of the distributions a requirements file names.

A layer installed on top of another (--no-deps: ATOM over the venv, aiter over ATOM) compiles its own files only.
uv's --compile-bytecode would compile the whole venv again, and `compileall` of site-packages stats every file of
every lower layer; the RECORD of each installed distribution lists exactly its own. Stdlib only. As uv's own compile
step, a file that does not compile (a package's Python 2 test data) is skipped, not an error.
"""

from __future__ import annotations

import csv
import py_compile
import re
import sys
from pathlib import Path


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted(requirements: Path) -> set[str]:
    names = set()
    for line in requirements.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)==", line.strip())
        if match:
            names.add(normalize(match.group(1)))
    return names


def sources(site: Path, names: set[str]) -> list[Path]:
    found = []
    for info in site.glob("*.dist-info"):
        if normalize(info.name.removesuffix(".dist-info").rsplit("-", 1)[0]) in names and (info / "RECORD").is_file():
            with (info / "RECORD").open(newline="") as fh:
                found += [site / row[0] for row in csv.reader(fh) if row and row[0].endswith(".py")]
    return sorted(p for p in found if p.is_file())


def main(argv: list[str]) -> int:
    requirements, site = Path(argv[0]), Path(argv[1])
    names = wanted(requirements)
    files = sources(site, names)
    compiled = 0
    for path in files:
        try:
            # Hash-checked: valid whatever a source file's time says (clamp_times.py sets every time afterwards).
            py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
            compiled += 1
        except (py_compile.PyCompileError, SyntaxError, UnicodeDecodeError):
            continue
    print(f"compile_new: {compiled} of {len(files)} files of {', '.join(sorted(names))} byte-compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
