"""What every check gets: the target arch, the device, and the options of the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from validation.core.archs import ArchFacts
from validation.core.device import DeviceInfo


@dataclass
class Context:
    arch: ArchFacts
    info: DeviceInfo
    aiter_root: Path | None = None  # the aiter package folder (installed, or --aiter-src)
    aiter_installed: bool = False  # importable, not just its files on disk
    aiter_from_source: bool = False  # aiter_root came from --aiter-src: its kernels run through the adapter
    aiter_commit: str | None = None  # the commit of aiter_root, where it can be read
    model: str = "llama3-8b"
    tp: list[int] = field(default_factory=lambda: [1, 8])
    cu_num: int | None = None
    tuned_csv: list[str] = field(default_factory=list)
    write_untuned: Path | None = None
    min_coverage: float = 0.0
    seed: int = 0
    full_shapes: bool = False  # GPU: model-sized layers; CPU: small shapes for the interpreter
    ck_mode: str | None = None  # --ck-mode, else the image's environment (validation.core.archs.ck_mode_from_env)
    ck_mode_source: str = ""  # which of those decided
    ck_mode_error: str = ""  # the image's environment contradicts itself

    @property
    def on_gpu(self) -> bool:
        return self.info.kind == "cuda"

    @property
    def aiter_on_gpu(self) -> str | None:
        """None when aiter's GPU kernels can run here, else the reason they cannot."""
        if not self.aiter_installed:
            return "aiter not installed"
        if not self.info.is_amd:
            return f"aiter kernels need an AMD GPU (device is {self.info.name})"
        return None
