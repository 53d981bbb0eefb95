"""What importing a module reaches: the closure of a direct-imports function, for the layer and build-context tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def closure(start: str, direct: Callable[[str], Iterable[str]]) -> set[str]:
    """Every name `direct` leads to from start, directly or through others (start itself only if a cycle returns)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for name in set(direct(todo.pop())) - seen:
            seen.add(name)
            todo.append(name)
    return seen
