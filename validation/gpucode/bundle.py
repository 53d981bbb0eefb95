"""Clang offload bundles: the `__CLANG_OFFLOAD_BUNDLE__` format and its compressed `CCOB` wrapper (zlib or zstd).

A bundle is a 24-byte magic, an entry count, then per entry (offset, size, triple length, triple), offsets from the
bundle's start; each HIP device entry is an AMDGPU code object whose own header is read too, so an entry's arch
comes from its bytes and its triple both. A CCOB wrapper is magic, version, method (0 zlib, 1 zstd) and the sizes
(v1: uncompressed; v2: total and uncompressed, 32 bits; v3: both 64 bits), then the compressed bundle: it is read
as a stream, so memory stays bounded whatever the sizes claim.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from validation.gpucode.elf import AmdgpuTarget, Malformed, amdgpu_target, parse_header

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB = b"CCOB"
MAX_ENTRIES = 4096  # a bundle holds one entry per --offload-arch plus the host's
CHUNK = 1 << 20
METHODS = {0: "zlib", 1: "zstd"}


@dataclass(frozen=True)
class Entry:
    triple: str  # e.g. hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
    offset: int  # within the (uncompressed) bundle
    size: int
    target: AmdgpuTarget | None  # from the entry's own ELF header; None for host entries and empty ones

    @property
    def triple_arch(self) -> str | None:
        """The arch the triple names (the part after amdgcn-amd-amdhsa-<env>-), None for a host entry."""
        if "amdgcn-amd-amdhsa" not in self.triple:
            return None
        rest = self.triple.split("amdgcn-amd-amdhsa", 1)[1].lstrip("-")
        return rest.split(":", 1)[0] or None


@dataclass(frozen=True)
class Bundle:
    offset: int  # in the file
    stored: int  # bytes it takes in the file (the compressed size for CCOB)
    compression: str | None  # None, "zlib" or "zstd"
    entries: tuple[Entry, ...]


class _FileReader:
    """Sequential reads of a region of a file."""

    def __init__(self, fh: BinaryIO, start: int, limit: int):
        self.fh, self.pos, self.limit, self.start = fh, 0, limit, start

    def read(self, n: int) -> bytes:
        n = max(0, min(n, self.limit - self.pos))
        self.fh.seek(self.start + self.pos)
        data = self.fh.read(n)
        self.pos += len(data)
        return data

    def skip_to(self, offset: int) -> None:
        self.pos = min(max(self.pos, offset), self.limit)


def read_bundle(fh: BinaryIO, start: int, limit: int) -> Bundle:
    """The bundle (plain or CCOB) at `start` of fh, at most `limit` bytes long."""
    fh.seek(start)
    magic = fh.read(len(MAGIC))
    if magic.startswith(CCOB):
        return _compressed(fh, start, limit)
    if magic != MAGIC:
        raise Malformed("no offload bundle magic")
    entries = _entries(_FileReader(fh, start, limit))
    end = max((e.offset + e.size for e in entries), default=len(MAGIC) + 8)
    return Bundle(start, end, None, entries)


def _entries(reader: _FileReader | _Decompressed) -> tuple[Entry, ...]:
    head = reader.read(len(MAGIC) + 8)
    if len(head) < len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
        raise Malformed("truncated offload bundle header")
    count, = struct.unpack_from("<Q", head, len(MAGIC))
    if count > MAX_ENTRIES:
        raise Malformed(f"offload bundle claims {count} entries")
    table = []
    for _ in range(count):
        fixed = reader.read(24)
        if len(fixed) < 24:
            raise Malformed("offload bundle entry table is truncated")
        offset, size, triple_len = struct.unpack("<QQQ", fixed)
        if triple_len > 4096:
            raise Malformed(f"offload bundle entry triple of {triple_len} bytes")
        triple = reader.read(triple_len)
        if len(triple) < triple_len:
            raise Malformed("offload bundle entry table is truncated")
        table.append((offset, size, triple.decode("ascii", "replace")))
    return tuple(_entry(reader, *row) for row in sorted(table))


def _entry(reader: _FileReader | _Decompressed, offset: int, size: int, triple: str) -> Entry:
    if offset + size > reader.limit:
        raise Malformed(f"entry {triple} ({size} bytes at {offset}) runs past the bundle's {reader.limit} bytes")
    target = None
    if size and "amdgcn" in triple:
        reader.skip_to(offset)
        header = parse_header(reader.read(min(size, 64)))
        if header is None:
            raise Malformed(f"entry {triple} is not an ELF code object")
        target = amdgpu_target(header)
    return Entry(triple, offset, size, target)


def _compressed(fh: BinaryIO, start: int, limit: int) -> Bundle:
    fh.seek(start)
    head = fh.read(32)
    if len(head) < 20:
        raise Malformed("truncated CCOB header")
    version, method = struct.unpack_from("<HH", head, 4)
    if version == 1:
        total, (raw,), at = None, struct.unpack_from("<I", head, 8), 20
    elif version == 2:
        (total, raw), at = struct.unpack_from("<II", head, 8), 24
    elif version == 3 and len(head) >= 32:
        (total, raw), at = struct.unpack_from("<QQ", head, 8), 32
    else:
        raise Malformed(f"CCOB version {version} is not one this reader knows (1-3)")
    if method not in METHODS:
        raise Malformed(f"CCOB compression method {method} is not zlib (0) or zstd (1)")
    stored = total if total is not None else limit
    if stored > limit or stored < at:
        raise Malformed(f"CCOB says {stored} bytes, {limit} are there")
    stream = _Decompressed(_decoder(METHODS[method]), fh, start + at, stored - at, raw)
    entries = _entries(stream)
    stream.skip_to(max((e.offset + e.size for e in entries), default=0))  # the entries' bytes are really there
    return Bundle(start, stored, METHODS[method], entries)


def _decoder(method: str) -> Callable[[Iterator[bytes]], Iterator[bytes]]:
    """A function from compressed chunks to decompressed blocks, for the method; Malformed when this Python has
    no decoder for it (zstd before 3.14 without the zstandard package)."""
    if method == "zlib":
        return _zlib
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14

        return lambda chunks: _stdlib_zstd(zstd.ZstdDecompressor(), chunks)
    except ImportError:
        pass
    try:
        import zstandard  # the host package's own dependency

        return lambda chunks: _zstandard(zstandard.ZstdDecompressor().decompressobj(), chunks)
    except ImportError:
        raise Malformed("zstd-compressed bundle and this Python has no zstd decoder") from None


def _zlib(chunks: Iterator[bytes]) -> Iterator[bytes]:
    dec = zlib.decompressobj()
    for data in chunks:
        while data:
            yield dec.decompress(data, CHUNK)
            data = dec.unconsumed_tail


def _stdlib_zstd(dec: Any, chunks: Iterator[bytes]) -> Iterator[bytes]:
    for data in chunks:
        yield dec.decompress(data, CHUNK)
        while not dec.needs_input and not dec.eof:
            yield dec.decompress(b"", CHUNK)


def _zstandard(dec: Any, chunks: Iterator[bytes]) -> Iterator[bytes]:
    for data in chunks:  # one compressed chunk's output at a time (bounded by the chunk and its ratio)
        yield dec.decompress(data)


class _Decompressed:
    """Sequential reads of a compressed region, decompressed a chunk at a time; never past the declared size."""

    def __init__(self, inflate: Callable[[Iterator[bytes]], Iterator[bytes]], fh: BinaryIO, start: int,
                 length: int, raw: int):
        self.limit, self.pos, self.buf = raw, 0, b""
        self._blocks = inflate(_chunks(fh, start, length))

    def _fill(self, upto: int) -> None:
        while self.pos + len(self.buf) < upto:
            try:
                block = next(self._blocks, None)
            except Exception as exc:  # zlib.error and each zstd binding's own error type
                raise Malformed(f"the compressed bundle does not decompress: {exc}") from None
            if block is None:
                raise Malformed(f"the compressed bundle ends at {self.pos + len(self.buf)} bytes, it claims {self.limit}")
            self.buf += block
            if self.pos + len(self.buf) > self.limit:
                raise Malformed(f"the compressed bundle inflates past the {self.limit} bytes it claims")

    def read(self, n: int) -> bytes:
        n = max(0, min(n, self.limit - self.pos))
        self._fill(self.pos + n)
        data, self.buf = self.buf[:n], self.buf[n:]
        self.pos += n
        return data

    def skip_to(self, offset: int) -> None:
        while self.pos < offset:
            self.read(min(CHUNK, offset - self.pos))


def _chunks(fh: BinaryIO, start: int, length: int) -> Iterator[bytes]:
    pos = 0
    while pos < length:
        fh.seek(start + pos)
        data = fh.read(min(CHUNK, length - pos))
        if not data:
            return
        pos += len(data)
        yield data
