"""The build machine's Triton cache behind the image's: a kernel an earlier build compiled is copied, not compiled.

Triton keys every kernel and C module by all that makes it (the kernel's source, Triton's own hash, the target, the
options, the cache-relevant environment; for a launcher its source and the platform), so what an earlier build left
under a key is what this build would compile there, byte for byte (two cold builds' digests agree: test_reproducible).
The image's cache is filled as before, Triton's own folder and file names; a key the machine's cache holds is copied
from it, and what is compiled is written to both. The warm step passes --reuse with a BuildKit cache mount: a bump
rebuilds the candidate, and with it the warm step, though few of its kernels changed.

A group file names its files by absolute path: a group taken from the machine's cache is written again naming the
image's copies, so the image never points outside itself. The mount is the builder's, as its layer cache is: whoever
can build on that BuildKit can write both, so it trusts no one the layer cache does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import triton
from triton.runtime.cache import FileCacheManager

from validation.warmcache import hooks

GROUP = "__grp__"


class Layered(FileCacheManager):
    """Triton's FileCacheManager on the image's cache (TRITON_CACHE_DIR), with `machine` behind it."""

    machine = ""  # set by behind()

    def __init__(self, key, override=False, dump=False):
        super().__init__(key, override, dump)
        self.behind = os.path.join(self.machine, key)

    def get_file(self, filename):
        return super().get_file(filename) or self._take(filename)

    def get_group(self, filename):
        group = super().get_group(filename)
        if group is not None:
            return group
        try:
            names = json.loads(Path(self.behind, GROUP + filename).read_text())["child_paths"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        taken = {name: self._take(name) for name in names}
        if None in taken.values():  # a group whose files are gone: compile it
            return None
        super().put_group(filename, taken)
        return taken

    def put(self, data, filename, binary=True):
        path = super().put(data, filename, binary)
        if not filename.startswith(GROUP):  # put_group below writes the machine's own
            self._give(filename, data)
        return path

    def put_group(self, filename, group):
        path = super().put_group(filename, group)
        self._give(GROUP + filename, json.dumps({"child_paths": {n: os.path.join(self.behind, n) for n in group}}))
        return path

    def _take(self, filename):
        try:
            data = Path(self.behind, filename).read_bytes()
        except OSError:
            return None
        return super().put(data, filename)

    def _give(self, filename, data) -> None:
        """Written as Triton writes (a temporary name, then an atomic rename); a machine cache that cannot be written
        costs the next build its reuse, not this one its image."""
        with contextlib.suppress(OSError):
            os.makedirs(self.behind, exist_ok=True)
            temp = os.path.join(self.behind, f".{filename}.{os.getpid()}.{uuid.uuid4().hex}")
            with open(temp, "wb") as f:
                f.write(data if isinstance(data, bytes) else str(data).encode())
            os.replace(temp, os.path.join(self.behind, filename))


@contextlib.contextmanager
def behind(machine: Path | None) -> Iterator[None]:
    """Triton's cache manager is Layered over `machine` for the block (nothing changes when it is None). Which files a
    kernel keeps (TRITON_STORE_BINARY_ONLY: the code object and its metadata, or every stage's IR too) is in no key:
    each setting has a folder of its own, so a kernel is copied with the files this build would have written."""
    if machine is None:
        yield
        return
    Layered.machine = str(machine / ("binary-only" if triton.knobs.compilation.store_binary_only else "every-stage"))
    with hooks.knob(triton.knobs.cache, "manager_class", Layered):
        yield
