"""The command-line parsers of validation/ (`python -m validation`, `validation.audit`, `validation.payload`,
`validation.tritoncache`): bad input is one line and exit 2, never argparse's usage dump. Standard library only: the
clean build step runs the payload reader with nothing else of validation/ beside it (.dockerignore)."""

from __future__ import annotations

import argparse

USAGE_ERROR = 2


class UsageError(Exception):
    """Bad flags or an impossible request: one line on stderr, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UsageError(message)
