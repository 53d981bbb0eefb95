"""GPU architectures we build for, their facts, and detection on the build host.

The facts (fp8 dtype and max, LDS per CU, CU counts) live in ONE table shared with the image side,
validation/core/archs.py (standard library only, so the image can read it too). Detection asks, in order: amd-smi, rocminfo, the KFD topology in sysfs, torch. Each probe is time-limited;
the first that names at least one GPU wins. Parsers are pure functions over the probe's text so that tests
feed them recorded outputs.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from validation.core.archs import ARCHS, ArchFacts


class Arch(enum.Enum):
    GFX942 = "gfx942"
    GFX950 = "gfx950"

    @property
    def facts(self) -> ArchFacts:
        """The one table of per-arch facts, shared with the image side (validation/core/archs.py)."""
        return ARCHS[self.value]

    @classmethod
    def parse(cls, name: str) -> Arch:
        """The arch for a name such as 'gfx942' or 'gfx942:sramecc+:xnack-'; anything else is a UsageError."""
        base = name.strip().lower().split(":")[0]
        if base in PRE_RELEASE:
            raise UsageError(
                f"{base} is a pre-release MI300 target that current ROCm no longer ships kernels for. "
                "To fix, update the driver and ROCm so the GPU reports gfx942, or pass --arch gfx942."
            )
        for arch in cls:
            if arch.value == base:
                return arch
        raise UsageError(f"architecture {name.strip()!r} is not supported. To fix, pass --arch {supported()}.")

    @classmethod
    def parse_list(cls, text: str) -> tuple[Arch, ...]:
        """'gfx942,gfx950' -> both, deduplicated in order. Used for matrix builds."""
        names = [n for n in re.split(r"[,;\s]+", text) if n]
        if not names:
            raise UsageError(f"--arch is empty. To fix, pass --arch {supported()}.")
        out: list[Arch] = []
        for n in names:
            arch = cls.parse(n)
            if arch not in out:
                out.append(arch)
        return tuple(out)


PRE_RELEASE = {"gfx940", "gfx941"}


def supported() -> str:
    return "|".join(a.value for a in Arch)


@dataclass(frozen=True)
class Gpu:
    name: str  # the gfx target as reported, e.g. 'gfx942'
    cus: int | None = None


@dataclass(frozen=True)
class Detection:
    arch: Arch
    gpus: tuple[Gpu, ...]
    source: str
    notes: tuple[str, ...] = field(default=())

    @property
    def cu_count(self) -> int | None:
        counts = {g.cus for g in self.gpus if g.cus}
        return counts.pop() if len(counts) == 1 else None


# ---- parsers: text in, GPUs out ------------------------------------------------------------------------

KFD_NODES = "class/kfd/kfd/topology/nodes"
_GFX = re.compile(r"\b(gfx[0-9a-f]{3,4})\b", re.IGNORECASE)


def parse_amd_smi(text: str) -> list[Gpu]:
    """`amd-smi static` in its text form ('GPU: 0' blocks) or its --json form."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            return _amd_smi_json(json.loads(stripped))
        except ValueError:
            return []
    gpus = []
    for block in re.split(r"^GPU:\s*\d+\s*$", text, flags=re.MULTILINE)[1:]:
        m = re.search(r"TARGET_GRAPHICS_VERSION:\s*(gfx[0-9a-f]+)", block, re.IGNORECASE)
        if m:
            cus = re.search(r"NUM_COMPUTE_UNITS:\s*(\d+)", block)
            gpus.append(Gpu(m.group(1).lower(), int(cus.group(1)) if cus else None))
    return gpus


def _amd_smi_json(data: object) -> list[Gpu]:
    entries = data if isinstance(data, list) else data.get("gpu_data", [data]) if isinstance(data, dict) else []
    gpus = []
    for entry in entries:
        target = _find_key(entry, "target_graphics_version")
        gfx = _GFX.search(target) if isinstance(target, str) else None
        if gfx:
            cus = _find_key(entry, "num_compute_units")
            gpus.append(Gpu(gfx.group(1).lower(), cus if isinstance(cus, int) else None))
    return gpus


def _find_key(node: object, key: str) -> object:
    if isinstance(node, dict):
        for k, v in node.items():
            if k.lower() == key:
                return v
            found = _find_key(v, key)
            if found is not None:
                return found
    return None


def parse_rocminfo(text: str) -> list[Gpu]:
    """rocminfo lists CPU agents first; keep agents whose Device Type is GPU and read their gfx name."""
    gpus = []
    for block in re.split(r"^\*{5,}\s*$", text, flags=re.MULTILINE):
        if not re.search(r"^\s*Device Type:\s*GPU\s*$", block, re.MULTILINE):
            continue
        # The agent's own 'Name: gfx942' comes first; ISA lines ('amdgcn-amd-amdhsa--gfx942:...') back it up.
        m = re.search(r"^\s*Name:\s*(gfx[0-9a-f]+)\s*$", block, re.MULTILINE | re.IGNORECASE)
        m = m or re.search(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)", block, re.IGNORECASE)
        if m:
            cus = re.search(r"^\s*Compute Unit:\s*(\d+)", block, re.MULTILINE)
            gpus.append(Gpu(m.group(1).lower(), int(cus.group(1)) if cus else None))
    return gpus


def gfx_from_target_version(value: int) -> str | None:
    """KFD's gfx_target_version: major*10000 + minor*100 + stepping, minor/stepping printed in hex."""
    if value <= 0:
        return None
    major, minor, step = value // 10000, (value // 100) % 100, value % 100
    return f"gfx{major}{minor:x}{step:x}"


def parse_kfd_properties(texts: Iterable[str]) -> list[Gpu]:
    """One text per /sys/class/kfd/kfd/topology/nodes/*/properties; CPU nodes report version 0."""
    gpus = []
    for text in texts:
        props = kfd_properties(text)
        name = gfx_from_target_version(props.get("gfx_target_version", 0))
        if name:
            simd, per_cu = props.get("simd_count", 0), props.get("simd_per_cu", 0)
            gpus.append(Gpu(name, simd // per_cu if simd and per_cu else None))
    return gpus


def kfd_properties(text: str) -> dict[str, int]:
    """One KFD node's `properties` text ('name value' lines) -> its integer values.

    The one parser for this file (arch detection and gpu.discover both read it); a line that is not a name and
    an integer is skipped, so a property the kernel adds later cannot break either.
    """
    props = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            props[parts[0]] = int(parts[1])
    return props


def kfd_nodes(sysfs: Path) -> list[tuple[int, str]]:
    """(node id, `properties` text) for every KFD topology node, in the order ROCr enumerates them.

    The one reader of /sys/class/kfd/kfd/topology: node ids sort numerically (10 after 9, as ROCr counts), bytes
    that are not UTF-8 are replaced rather than fatal, and a node whose file cannot be read gives "" (no GPU).
    """
    root = Path(sysfs) / KFD_NODES
    if not root.is_dir():
        return []
    nodes = []
    for entry in sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        try:
            text = (entry / "properties").read_text(errors="replace")
        except OSError:
            text = ""
        nodes.append((int(entry.name), text))
    return nodes


def parse_torch(text: str) -> list[Gpu]:
    """Lines of 'gcnArchName<TAB>multi_processor_count' printed by the torch probe."""
    gpus = []
    for line in text.splitlines():
        parts = line.strip().split()
        if parts and _GFX.match(parts[0].split(":")[0]):
            cus = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            gpus.append(Gpu(parts[0].split(":")[0].lower(), cus))
    return gpus


# ---- probes: run a command (time-limited), hand its text to a parser ----------------------------------

TORCH_PROBE = (
    "import torch\n"
    "for i in range(torch.cuda.device_count()):\n"
    "    p = torch.cuda.get_device_properties(i)\n"
    "    print(getattr(p, 'gcnArchName', ''), p.multi_processor_count)\n"
)

Runner = Callable[[list[str], float], "tuple[str, bool] | None"]
"""(argv, timeout) -> (stdout, timed_out), or None when the binary is absent or the command failed."""


@dataclass(frozen=True)
class Probe:
    name: str
    read: Callable[[Runner, Path], tuple[str, bool] | None]
    parse: Callable[[str], list[Gpu]]


def _read_kfd(_: Runner, sysfs: Path) -> tuple[str, bool] | None:
    nodes = kfd_nodes(sysfs)
    if not nodes:
        return None
    return "\0".join(text for _, text in nodes), False


PROBES = (
    Probe("amd-smi", lambda run, _: run(["amd-smi", "static"], PROBE_TIMEOUT), parse_amd_smi),
    Probe("rocminfo", lambda run, _: run(["rocminfo"], PROBE_TIMEOUT), parse_rocminfo),
    Probe("kfd-sysfs", _read_kfd, lambda text: parse_kfd_properties(text.split("\0"))),
    Probe("torch", lambda run, _: run(["python3", "-c", TORCH_PROBE], PROBE_TIMEOUT), parse_torch),
)
PROBE_TIMEOUT = 20.0


def detect(runner: Runner, sysfs: Path = Path("/sys"), probes: tuple[Probe, ...] = PROBES) -> Detection:
    """Ask each probe in turn; the first that finds GPUs decides. Mixed archs or none found are errors."""
    notes = []
    for probe in probes:
        got = probe.read(runner, sysfs)
        if got is None:
            notes.append(f"{probe.name}: not available")
            continue
        text, timed_out = got
        if timed_out:
            notes.append(f"{probe.name}: no answer within {PROBE_TIMEOUT:.0f} s")
            continue
        gpus = probe.parse(text)
        if not gpus:
            notes.append(f"{probe.name}: no GPU in its output")
            continue
        return Detection(_one_arch(gpus, probe.name), tuple(gpus), probe.name, tuple(notes))
    hung = [n for n in notes if "no answer" in n]
    why = "; ".join(notes)
    if hung:
        raise EnvironmentProblem(f"no GPU architecture detected ({why}). To fix, check the ROCm driver or pass --arch {supported()}.")
    raise UsageError(f"no AMD GPU found on this host and no --arch given ({why}). To fix, pass --arch {supported()}.")


def _one_arch(gpus: list[Gpu], source: str) -> Arch:
    names = sorted({g.name for g in gpus})
    if len(names) > 1:
        counts = ", ".join(f"{sum(g.name == n for g in gpus)}x {n}" for n in names)
        raise UsageError(
            f"mixed GPU architectures on this host ({counts}, from {source}). "
            "To fix, pass --arch for the one you build for, and set HIP_VISIBLE_DEVICES to its GPUs at run time."
        )
    return Arch.parse(names[0])


def resolve(arch: Arch | None, runner: Runner, sysfs: Path = Path("/sys")) -> Detection:
    """--arch when given (no probing), else detection."""
    if arch is not None:
        return Detection(arch, (), "--arch")
    return detect(runner, sysfs)


def host_runner(argv: list[str], timeout: float) -> tuple[str, bool] | None:
    """The real Runner: absent binary or failing command -> None; a hang -> (partial output, True)."""
    from cleanbuild.core.run import run, which

    if which(argv[0]) is None:
        return None
    result = run(argv, check=False, capture=True, timeout=timeout, echo=False)
    if result.timed_out:
        return result.stdout, True
    return (result.stdout, False) if result.returncode == 0 else None
