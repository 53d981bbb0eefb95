"""Run a generation command, find its `Completion: '<text>'` line, and count the new tokens (stdlib only).

    python /opt/atom-build/smoke.py --model DIR --min-tokens 10 -- python -m atom.examples.simple_inference ...

Prints one line `SMOKE_RESULT {json}` and exits non-zero when the command fails or too few tokens came out.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys

COMPLETION = re.compile(r"^Completion:\s*(?P<text>(?P<q>['\"]).*(?P=q))\s*$", re.MULTILINE)


def find_completion(stdout: str) -> str | None:
    """The text of the last `Completion: '<text>'` line (a Python string literal, as ATOM prints it)."""
    matches = list(COMPLETION.finditer(stdout))
    if not matches:
        return None
    literal = matches[-1].group("text")
    try:
        return str(ast.literal_eval(literal))
    except (ValueError, SyntaxError):
        return literal[1:-1]


def count_tokens(text: str, model: str) -> tuple[int, str]:
    """Tokens by the model's own tokenizer when transformers can load it, else by whitespace."""
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415 - optional

        tokenizer = AutoTokenizer.from_pretrained(model)
        return len(tokenizer.encode(text, add_special_tokens=False)), "transformers.AutoTokenizer"
    except Exception:  # noqa: BLE001 - no transformers, or no tokenizer in the model folder
        return len(text.split()), "whitespace"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--min-tokens", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=False)  # noqa: S603
        stdout, stderr, returncode = proc.stdout, proc.stderr, proc.returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        stdout, stderr, returncode = "", str(exc), 127 if isinstance(exc, OSError) else 124
    sys.stderr.write(stderr[-4000:])
    sys.stdout.write(stdout[-4000:])
    completion = find_completion(stdout)
    new_tokens, counted_by = count_tokens(completion, args.model) if completion is not None else (0, "none")
    result = {"new_tokens": new_tokens, "counted_by": counted_by, "completion": completion,
              "returncode": returncode, "min_tokens": args.min_tokens}
    print("SMOKE_RESULT " + json.dumps(result), flush=True)
    if returncode != 0:
        print(f"smoke: the command failed with exit code {returncode}", file=sys.stderr)
        return 1
    if new_tokens < args.min_tokens:
        print(f"smoke: {new_tokens} new tokens (counted by {counted_by}), fewer than {args.min_tokens}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
