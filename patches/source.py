"""One Python file as bytes, with the ast spans needed to edit it in place.

Everything works on bytes: ast reports column offsets in UTF-8 bytes, so byte
offsets need no conversion and every byte outside an edit stays as it was.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace data[start:end] with text (written with "\\n"; see Source.apply)."""

    start: int
    end: int
    text: str


class Drift(Exception):
    """The anchor a patch needs is missing or ambiguous at this line."""

    def __init__(self, line: int, expected: str):
        super().__init__(expected)
        self.line = line
        self.expected = expected


# The nodes that have a position in the text (ast.parse sets all four of their positions).
Node = ast.stmt | ast.expr | ast.excepthandler | ast.arg | ast.keyword


def end_line(node: Node) -> int:
    if node.end_lineno is None:  # only a node built by hand, never one ast.parse made
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end position")
    return node.end_lineno


def _end_col(node: Node) -> int:
    if node.end_col_offset is None:
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end position")
    return node.end_col_offset


class Source:
    def __init__(self, data: bytes, path: str = "<source>"):
        _check_utf8(data)
        self.data = data
        self.path = path
        self.line_starts = _line_starts(data)
        first, sep, _ = data.partition(b"\n")
        self.newline = "\r\n" if sep and first.endswith(b"\r") else "\n"
        self.tree = parse(data)

    # --- positions -------------------------------------------------------------
    def offset(self, lineno: int, col: int) -> int:
        return self.line_starts[lineno - 1] + col

    def span(self, node: Node) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)
        return start, self.offset(end_line(node), _end_col(node))

    def segment(self, node: Node) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode("utf-8")

    def line(self, lineno: int) -> str:
        """The text of a 1-based line, without its line ending ("" past the end)."""
        if not 1 <= lineno <= len(self.line_starts):
            return ""
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.data)
        return self.data[start:end].decode("utf-8").rstrip("\r\n")

    def line_start(self, lineno: int) -> int:
        return self.line_starts[lineno - 1]

    def line_end(self, lineno: int) -> int:
        """Offset just past the line ending of a 1-based line."""
        return self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.data)

    def indent(self, node: Node) -> str:
        text = self.line(node.lineno)
        return text[: len(text) - len(text.lstrip())]

    def comment_above(self, node: Node) -> str:
        """The comment on the line just above a statement ("" when there is none)."""
        above = self.line(node.lineno - 1).strip()
        return above if above.startswith("#") else ""

    # --- rewriting -------------------------------------------------------------
    def apply(self, edits: list[Edit]) -> bytes:
        """Apply non-overlapping edits; inserted newlines follow the file's own style."""
        out, pos = [], 0
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            if edit.start < pos:
                raise ValueError(f"overlapping edits at byte {edit.start} of {self.path}")
            out.append(self.data[pos : edit.start])
            out.append(edit.text.replace("\n", self.newline).encode("utf-8"))
            pos = edit.end
        out.append(self.data[pos:])
        return b"".join(out)


def parse(data: bytes) -> ast.Module:
    try:
        return _tree(data)
    except SyntaxError as exc:
        raise Drift(exc.lineno or 1, f"valid Python ({exc.msg})") from exc
    except ValueError as exc:  # e.g. a NUL byte
        raise Drift(1, f"valid Python ({exc})") from exc


@functools.lru_cache(maxsize=64)
def _tree(data: bytes) -> ast.Module:
    """One parse per file's bytes in a process, wherever the file lies (a failed parse is not kept): a run checks
    every patch, applies them and checks again, each reading the same file. The tree is only read: a patch's edits
    are bytes (Source.apply)."""
    return ast.parse(data)


def _line_starts(data: bytes) -> list[int]:
    # Python also breaks lines at a lone "\r"; such files are rare enough that
    # refusing them beats computing wrong offsets.
    lone_cr = re.search(rb"\r(?!\n)", data)
    if lone_cr:
        line = data.count(b"\n", 0, lone_cr.start()) + 1
        raise Drift(line, "LF or CRLF line endings (found a lone CR)")
    return [0] + [m.end() for m in re.finditer(rb"\n", data)]


def _check_utf8(data: bytes) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Drift(data.count(b"\n", 0, exc.start) + 1, "UTF-8 source text") from exc
