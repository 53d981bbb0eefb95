"""`nox -s validate -- --image TAG ...`: the `validate` task (cleanbuild.cli.collection), through atom-build's front door.

The same flags as `atom-build validate` (--image, --arch, --device, --gpu, --user-id, --json-file, --profile,
--set, --debug), then `-- ARGS` for the kernels' own CLI; the same exit codes.
"""

from __future__ import annotations

import sys

from cleanbuild.cli.main import main as atom_build


def main(argv: list[str] | None = None) -> None:
    atom_build(["atom-build", "validate", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
