"""ELF headers and sections, and what an AMDGPU code object's header says: arch, xnack/sramecc, code object version.

The arch is `e_flags & EF_AMDGPU_MACH` (LLVM's BinaryFormat/ELF.h, AMDGPUUsage "ELF Header"); the feature bits are
bits 8-11 from code object v4 on (two bits each: unsupported, any, off, on), single on/off bits in v3; the code
object version is EI_ABIVERSION + 2 under ELFOSABI_AMDGPU_HSA (v2 is 0 there). Values are checked against
llvm-readelf in tests/validation/gpucode/test_payload_real.py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
MAX_SECTIONS = 65535  # e_shnum is 16 bits: a header can never ask for more

# EF_AMDGPU_MACH values, GCN/CDNA/RDNA only (R600 is not a compute target ROCm loads).
MACH = {
    0x020: "gfx600", 0x021: "gfx601", 0x03a: "gfx602", 0x022: "gfx700", 0x023: "gfx701", 0x024: "gfx702",
    0x025: "gfx703", 0x026: "gfx704", 0x03b: "gfx705", 0x028: "gfx801", 0x029: "gfx802", 0x02a: "gfx803",
    0x03c: "gfx805", 0x02b: "gfx810", 0x02c: "gfx900", 0x02d: "gfx902", 0x02e: "gfx904", 0x02f: "gfx906",
    0x030: "gfx908", 0x031: "gfx909", 0x032: "gfx90c", 0x03f: "gfx90a", 0x040: "gfx940", 0x04b: "gfx941",
    0x04c: "gfx942", 0x04f: "gfx950", 0x033: "gfx1010", 0x034: "gfx1011", 0x035: "gfx1012", 0x042: "gfx1013",
    0x036: "gfx1030", 0x037: "gfx1031", 0x038: "gfx1032", 0x039: "gfx1033", 0x03e: "gfx1034", 0x03d: "gfx1035",
    0x045: "gfx1036", 0x041: "gfx1100", 0x046: "gfx1101", 0x047: "gfx1102", 0x044: "gfx1103", 0x043: "gfx1150",
    0x04a: "gfx1151", 0x055: "gfx1152", 0x058: "gfx1153", 0x048: "gfx1200", 0x04e: "gfx1201", 0x049: "gfx1250",
    0x051: "gfx9-generic", 0x05f: "gfx9-4-generic", 0x052: "gfx10-1-generic", 0x053: "gfx10-3-generic",
    0x054: "gfx11-generic", 0x059: "gfx12-generic",
}
FEATURE_V4 = {0: "unsupported", 1: "any", 2: "off", 3: "on"}


class Malformed(Exception):
    """The bytes claim a format and break it: the reason is one line for the manifest's unknown list."""


@dataclass(frozen=True)
class Header:
    is64: bool
    little: bool
    osabi: int
    abiversion: int
    machine: int
    flags: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def fmt(self) -> str:
        return "<" if self.little else ">"


@dataclass(frozen=True)
class AmdgpuTarget:
    """What an AMDGPU code object's header says it is for."""

    arch: str | None  # None: a mach value this table does not know (listed, never guessed)
    mach: int
    xnack: str
    sramecc: str
    code_object: int | None  # code object version, None when the OS/ABI is not AMDGPU HSA

    @property
    def name(self) -> str:
        """The target ID as the HIP runtime spells it: gfx942, gfx942:xnack+, gfx950:sramecc-:xnack-."""
        feats = [f"{k}{'+' if v == 'on' else '-'}" for k, v in (("sramecc", self.sramecc), ("xnack", self.xnack))
                 if v in ("on", "off")]
        return ":".join([self.arch or f"mach-{self.mach:#04x}", *feats])


def parse_header(head: bytes) -> Header | None:
    """None when the bytes are not ELF; Malformed when they say ELF and then do not hold its header."""
    if head[:4] != ELF_MAGIC:
        return None
    if len(head) < 52:
        raise Malformed(f"truncated ELF header ({len(head)} bytes)")
    cls, data = head[4], head[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise Malformed(f"bad ELF class/encoding ({cls}, {data})")
    is64, fmt = cls == 2, "<" if data == 1 else ">"
    if is64 and len(head) < 64:
        raise Malformed(f"truncated ELF64 header ({len(head)} bytes)")
    machine, = struct.unpack_from(fmt + "H", head, 18)
    if is64:
        shoff, flags = struct.unpack_from(fmt + "Q", head, 40)[0], struct.unpack_from(fmt + "I", head, 48)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(fmt + "HHH", head, 58)
    else:
        shoff, flags = struct.unpack_from(fmt + "I", head, 32)[0], struct.unpack_from(fmt + "I", head, 36)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(fmt + "HHH", head, 46)
    return Header(is64, data == 1, head[7], head[8], machine, flags, shoff, shentsize, shnum, shstrndx)


def amdgpu_target(h: Header) -> AmdgpuTarget:
    mach = h.flags & 0xFF
    version = h.abiversion + 2 if h.osabi == ELFOSABI_AMDGPU_HSA else None
    if version is not None and version >= 4:
        xnack, sramecc = FEATURE_V4[(h.flags >> 8) & 3], FEATURE_V4[(h.flags >> 10) & 3]
    else:  # v3 (and v2, which has no feature bits): one bit each, set means on
        xnack = "on" if h.flags & 0x100 else "any"
        sramecc = "on" if h.flags & 0x200 else "any"
    return AmdgpuTarget(MACH.get(mach), mach, xnack, sramecc, version)


def sections(fh: BinaryIO, h: Header, size: int) -> dict[str, tuple[int, int]]:
    """name -> (file offset, size) of every section that has bytes in the file. Reads the section header table and
    the name table only; Malformed when either points past the end of the file."""
    entry = 64 if h.is64 else 40
    if h.shnum == 0 or h.shoff == 0:
        return {}
    if h.shentsize < entry or h.shnum > MAX_SECTIONS or h.shoff + h.shnum * h.shentsize > size:
        raise Malformed(f"section headers ({h.shnum} x {h.shentsize} at {h.shoff}) run past the end ({size} bytes)")
    fh.seek(h.shoff)
    table = fh.read(h.shnum * h.shentsize)
    raw = [_section(table, i * h.shentsize, h) for i in range(h.shnum)]
    if not 0 <= h.shstrndx < len(raw):
        raise Malformed(f"section name table index {h.shstrndx} out of range")
    names_off, names_size, _ = raw[h.shstrndx][1:]
    if names_off + names_size > size or names_size > 1 << 24:
        raise Malformed("section name table runs past the end of the file")
    fh.seek(names_off)
    names = fh.read(names_size)
    out = {}
    for name_at, off, length, kind in raw:
        if kind == 8:  # SHT_NOBITS: no bytes in the file
            continue
        name = names[name_at:names.find(b"\0", name_at)].decode("ascii", "replace") if name_at < len(names) else ""
        out[name] = (off, length)
    return out


def _section(table: bytes, at: int, h: Header) -> tuple[int, int, int, int]:
    """(name index, offset, size, type) of one section header."""
    if h.is64:
        name, kind, _flags, _addr, off, length = struct.unpack_from(h.fmt + "IIQQQQ", table, at)
    else:
        name, kind, _flags, _addr, off, length = struct.unpack_from(h.fmt + "IIIIII", table, at)
    return name, off, length, kind
