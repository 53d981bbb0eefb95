"""What a Dockerfile target depends on, as text: the stages a `--target` reaches, their lines and their ARGs.

A component's key covers the stages that build it and the build arguments they read, and nothing else, so an edit
of the aiter stage does not move ATOM's key and ATOM's pin is not an input of the torch wheel. Stages are reached
through `FROM <stage>` (ARGs substituted with the values of this build), `--mount=...,from=<stage>` and
`COPY --from=<stage>`; the ARG lines before the first FROM belong to every target.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_FROM = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)
_REFS = re.compile(r"(?:--from=|[\s,]from=)([A-Za-z0-9_.${}-]+)")
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.MULTILINE)
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_COMMENT = re.compile(r"^\s*#")
_DIRECTIVE = re.compile(r"^#\s*(?:syntax|escape|check)\s*=", re.IGNORECASE)  # parser directives: they count


@dataclass(frozen=True)
class Stage:
    name: str
    base: str  # the FROM operand, unsubstituted
    text: str


@cache
def _parse(text: str) -> tuple[str, dict[str, Stage]]:
    preamble: list[str] = []
    stages: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if _COMMENT.match(line) and not (current is None and _DIRECTIVE.match(line)):
            continue  # BuildKit drops comments (a RUN's continuation lines too): an edited comment builds nothing
        match = _FROM.match(line.strip())
        if match:
            current = [line]
            stages[match.group(2) or f"#{len(stages)}"] = (match.group(1), current)
        elif current is None:
            preamble.append(line)
        else:
            current.append(line)
    return "\n".join(preamble), {n: Stage(n, base, "\n".join(lines)) for n, (base, lines) in stages.items()}


def _defaults(preamble: str) -> dict[str, str]:
    return {m.group(1): m.group(2) or "" for m in _ARG.finditer(preamble)}


def _expand(operand: str, values: Mapping[str, str]) -> str:
    return _VAR.sub(lambda m: values.get(m.group(1), ""), operand)


def reached(text: str, target: str, args: Mapping[str, str]) -> list[Stage]:
    """The stages `--target target` runs with these build arguments, in file order."""
    preamble, stages = _parse(text)
    if target not in stages:
        raise KeyError(f"no stage {target!r}")
    values = {**_defaults(preamble), **args}
    todo, seen = [target], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in stages:
            continue
        seen.add(name)
        base = _base_stage(stages, name, values)
        if base is not None:
            todo.append(base)
        todo += [_expand(ref, values) for ref in _REFS.findall(stages[name].text)]
    return [s for n, s in stages.items() if n in seen]


def _base_stage(stages: dict[str, Stage], name: str, values: Mapping[str, str]) -> str | None:
    """The stage that stage name starts FROM, or None where its FROM names an image: FROM names a stage only if
    that stage is defined above it (BuildKit pulls `docker.io/library/<name>` otherwise)."""
    base = _expand(stages[name].base, values)
    order = list(stages)
    return base if base in stages and order.index(base) < order.index(name) else None


def from_chain(text: str, target: str, args: Mapping[str, str]) -> list[str]:
    """The stages target's FROM lines go through, target first: the stages whose instructions are the layers of
    the target's image (a stage it reads with COPY --from or --mount is not among them)."""
    preamble, stages = _parse(text)
    values = {**_defaults(preamble), **args}
    chain = [target]
    while (base := _base_stage(stages, chain[-1], values)) is not None:
        chain.append(base)
    return chain


def built_on(text: str, target: str, args: Mapping[str, str], stage: str) -> set[str]:
    """The stages `--target target` runs, with these build arguments, that start FROM stage (their FROM lines
    followed through stage names) and run an instruction of their own; stage itself left out. BuildKit keys such a
    stage's cache by the chain below it, not by its content (a COPY --from or a --mount source is keyed by content)."""
    return {s.name for s in reached(text, target, args)
            if s.name != stage and stage in from_chain(text, s.name, args) and _runs(s)}


def _runs(stage: Stage) -> bool:
    """Whether the stage has an instruction besides FROM and ARG (an alias such as `FROM ${BUILDER} AS builder` has
    none)."""
    return any(line.strip() and not _ARG.match(line) for line in stage.text.splitlines()[1:])


def base_image(path: Path, target: str | None, args: Mapping[str, str]) -> str:
    """The image a target starts FROM, its FROM lines followed through stage names, with this build's arguments
    substituted ("scratch" for a target that starts from nothing; a name no stage above carries is an image). No
    target: the file's last stage."""
    text = path.read_text()
    preamble, stages = _parse(text)
    bottom = from_chain(text, target if target is not None else list(stages)[-1], args)[-1]
    return _expand(stages[bottom].base, {**_defaults(preamble), **args})


def used_args(path: Path, target: str, args: Mapping[str, str]) -> set[str]:
    """The build arguments the target reads: ARGs of its stages and the global ARGs its FROM lines name."""
    text = path.read_text()
    stages = reached(text, target, args)
    return {m.group(1) for s in stages for m in _ARG.finditer(s.text)} | {
        v for s in stages for v in _VAR.findall(s.base)}


def declared_args(path: Path) -> set[str]:
    """Every ARG name the Dockerfile declares (global and per stage)."""
    return {m.group(1) for m in _ARG.finditer(path.read_text())}


def global_args(path: Path) -> set[str]:
    """The ARGs before the first FROM: BuildKit 0.8 parses every stage, so each build passes them all."""
    return set(_defaults(_parse(path.read_text())[0]))


def stage_digest(path: Path, target: str, args: Mapping[str, str]) -> str:
    """sha256 of the preamble and the text of every stage the target reaches, comments aside (parser directives
    such as `# syntax=` kept)."""
    text = path.read_text()
    h = hashlib.sha256(_parse(text)[0].encode())
    for stage in reached(text, target, args):
        h.update(b"\0" + stage.text.encode())
    return h.hexdigest()
