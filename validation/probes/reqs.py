"""Requires-Dist checked against what is installed, with the standard library only (no `packaging` needed).

Enough of PEP 440 (versions, specifiers) and PEP 508 (requirements, environment markers) to do what
`pip check` does: every requirement whose marker holds (extras off) must be installed at a matching version.
A requirement this cannot parse is reported as unparsed, never guessed.
"""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass

_VERSION = re.compile(
    r"""^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?P<dev>[-_.]?dev[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc", "rc": "rc"}
_OPS = ("===", "~=", "==", "!=", "<=", ">=", "<", ">")


@dataclass(frozen=True)
class Version:
    epoch: int
    release: tuple[int, ...]
    pre: tuple[str, int] | None
    post: int | None
    dev: int | None
    local: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        m = _VERSION.match(text)
        if not m:
            raise ValueError(f"not a PEP 440 version: {text!r}")
        pre = (_PRE[m["pre_l"].lower()], int(m["pre_n"] or 0)) if m["pre_l"] else None
        post = m["post_n1"] or (m["post_n2"] or "0" if m["post_l"] else None)
        dev = int(m["dev_n"] or 0) if m["dev"] else None
        local = tuple(re.split(r"[-_.]", m["local"].lower())) if m["local"] else ()
        return cls(int(m["epoch"] or 0), tuple(int(x) for x in m["release"].split(".")), pre,
                   int(post) if post is not None else None, dev, local)

    @property
    def public(self) -> Version:
        return Version(self.epoch, self.release, self.pre, self.post, self.dev, ())

    @property
    def is_pre(self) -> bool:
        return self.pre is not None or self.dev is not None

    def key(self) -> tuple:
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple = (-1,)  # 1.0.dev0 sorts before 1.0a0
        else:
            pre = (2,) if self.pre is None else (0, ["a", "b", "rc"].index(self.pre[0]), self.pre[1])
        post = (-1,) if self.post is None else (0, self.post)
        dev = (1,) if self.dev is None else (0, self.dev)
        local = tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in self.local) if self.local else ((-1, 0, ""),)
        return (self.epoch, tuple(release), pre, post, dev, local)


def parse_version(text: str) -> Version:
    return Version.parse(text)


def _padded(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def _prefix_match(candidate: Version, spec_text: str) -> bool:
    """`==X.Y.*`: the candidate's release, zero-padded, starts with X.Y (pre, post and dev releases included)."""
    spec = parse_version(spec_text)
    if spec.pre or spec.post is not None or spec.dev is not None or spec.local:
        raise ValueError(f"prefix match on {spec_text!r} is not supported here")
    n = len(spec.release)
    return candidate.epoch == spec.epoch and _padded(candidate.release, n)[:n] == spec.release


def contains(op: str, spec_text: str, candidate_text: str) -> bool:
    """Does the installed version satisfy one specifier (pre-releases allowed, as pip check allows them)?"""
    if op == "===":
        return candidate_text.strip().lower() == spec_text.strip().lower()
    candidate = parse_version(candidate_text)
    if op in ("==", "!=") and spec_text.endswith(".*"):
        hit = _prefix_match(candidate, spec_text[:-2])
        return hit if op == "==" else not hit
    spec = parse_version(spec_text)
    if op in ("==", "!="):
        cand = candidate if spec.local else candidate.public
        hit = cand.key() == spec.key()
        return hit if op == "==" else not hit
    if op == "~=":
        if len(spec.release) < 2:
            raise ValueError(f"~={spec_text} needs at least two release segments")
        prefix = ".".join(str(x) for x in spec.release[:-1])
        return contains(">=", spec_text, candidate_text) and _prefix_match(candidate, (f"{spec.epoch}!" if spec.epoch else "") + prefix)
    return _ordered(op, spec, candidate.public)


def _ordered(op: str, spec: Version, cand: Version) -> bool:
    if op == "<=":
        return cand.key() <= spec.key()
    if op == ">=":
        return cand.key() >= spec.key()
    if op == "<":
        same_release = _padded(cand.release, 9) == _padded(spec.release, 9) and cand.epoch == spec.epoch
        return cand.key() < spec.key() and not (not spec.is_pre and cand.is_pre and same_release)
    if op == ">":
        same_release = _padded(cand.release, 9) == _padded(spec.release, 9) and cand.epoch == spec.epoch
        return cand.key() > spec.key() and not (spec.post is None and cand.post is not None and same_release)
    raise ValueError(f"unknown operator {op!r}")


@dataclass(frozen=True)
class Requirement:
    name: str
    specifiers: tuple[tuple[str, str], ...]
    marker: str | None
    url: str | None


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def parse_requirement(text: str) -> Requirement:
    m = _REQ.match(text)
    if not m:
        raise ValueError(f"not a requirement: {text!r}")
    name, rest = m.group(1), m.group(3)
    marker = None
    if ";" in rest:
        rest, marker = rest.split(";", 1)
        marker = marker.strip() or None
    rest = rest.strip()
    if rest.startswith("@"):
        return Requirement(name, (), marker, rest[1:].strip())
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1]
    specs = []
    for part in (p.strip() for p in rest.split(",") if p.strip()):
        op = next((o for o in _OPS if part.startswith(o)), None)
        value = part[len(op):].strip() if op else ""
        if not value:
            raise ValueError(f"bad specifier {part!r} in {text!r}")
        if op != "===":
            parse_version(value[:-2] if value.endswith(".*") else value)  # ValueError now, not at comparison
        specs.append((op, value))
    return Requirement(name, tuple(specs), marker, None)


def marker_environment() -> dict[str, str]:
    impl = sys.implementation
    iv = impl.version
    impl_version = f"{iv.major}.{iv.minor}.{iv.micro}"
    if iv.releaselevel != "final":
        impl_version += iv.releaselevel[0] + str(iv.serial)
    return {
        "implementation_name": impl.name, "implementation_version": impl_version, "os_name": __import__("os").name,
        "platform_machine": platform.machine(), "platform_release": platform.release(),
        "platform_system": platform.system(), "platform_version": platform.version(),
        "python_full_version": platform.python_version(), "platform_python_implementation":
        platform.python_implementation(), "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform, "extra": "",
    }


_TOKEN = re.compile(r"""\s*(?:(?P<str>'[^']*'|"[^"]*")|(?P<op>===|==|!=|<=|>=|~=|<|>|\(|\)|not\s+in\b|in\b)|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))""")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read marker {text!r} at {pos}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        out.append((kind, re.sub(r"\s+", " ", value) if kind == "op" else value))
        pos = m.end()
    return out


def evaluate_marker(text: str, env: dict[str, str]) -> bool:
    """PEP 508 marker: `or` of `and` of comparisons, with parentheses."""
    tokens = _tokens(text)
    value, pos = _or(tokens, 0, env)
    if pos != len(tokens):
        raise ValueError(f"trailing text in marker {text!r}")
    return value


def _or(t, pos, env):
    value, pos = _and(t, pos, env)
    while pos < len(t) and t[pos] == ("word", "or"):
        right, pos = _and(t, pos + 1, env)
        value = value or right
    return value, pos


def _and(t, pos, env):
    value, pos = _atom(t, pos, env)
    while pos < len(t) and t[pos] == ("word", "and"):
        right, pos = _atom(t, pos + 1, env)
        value = value and right
    return value, pos


def _atom(t, pos, env):
    if pos < len(t) and t[pos] == ("op", "("):
        value, pos = _or(t, pos + 1, env)
        if pos >= len(t) or t[pos] != ("op", ")"):
            raise ValueError("unbalanced parentheses in marker")
        return value, pos + 1
    if pos + 2 >= len(t):
        raise ValueError("incomplete marker comparison")
    left, op, right = t[pos], t[pos + 1], t[pos + 2]
    if op[0] != "op":
        raise ValueError(f"expected an operator in marker, got {op[1]!r}")
    return _compare(_operand(left, env), op[1], _operand(right, env), left, right), pos + 3


def _operand(token: tuple[str, str], env: dict[str, str]) -> str:
    kind, value = token
    if kind == "str":
        return value[1:-1]
    if kind == "word" and value in env:
        return env[value]
    raise ValueError(f"unknown marker variable {value!r}")


def _compare(lhs: str, op: str, rhs: str, left, right) -> bool:
    if "extra" in (left[1], right[1]):
        lhs, rhs = _norm_extra(lhs), _norm_extra(rhs)
    if op == "in":
        return lhs in rhs
    if op == "not in":
        return lhs not in rhs
    try:
        return contains(op, rhs, lhs)
    except ValueError:
        if op == "==":
            return lhs == rhs
        if op == "!=":
            return lhs != rhs
        raise


def _norm_extra(value: str) -> str:
    return re.sub(r"[-_.]+", "-", value).lower()
