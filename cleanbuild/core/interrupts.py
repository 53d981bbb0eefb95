"""Ctrl-C held back around work that must finish once begun: a multi-file replace, cleanup, a container that a
read creates and removes. SIGINT is counted in the block; with reraise, KeyboardInterrupt comes right after it.
A block inside another one leaves the presses to the outer block (cleanup's reads never raise mid-cleanup).
Python delivers signals to the main thread only, so elsewhere there is nothing to hold."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# The one line every front door prints for Ctrl-C (exit 130), after cleanup ran.
INTERRUPTED = "error: interrupted (Ctrl-C). To fix, run the command again; temporary containers were removed."
_outer: list[list[int]] = []  # the presses of the outermost active block (main thread only)


@contextlib.contextmanager
def held(reraise: bool = True) -> Iterator[list[int]]:
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    if _outer:
        yield _outer[0]
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: pressed.append(signum))
    _outer.append(pressed)
    try:
        yield pressed
    finally:
        _outer.clear()
        signal.signal(signal.SIGINT, previous)
    if pressed and reraise:
        raise KeyboardInterrupt
