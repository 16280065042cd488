"""The conversation journal: append-only, framed, checksummed records.

Why: the journal is the single source of truth of a conversation. ``history.json``,
``meta.json`` and the per-turn ``messages.log`` files are views that recovery rebuilds from it,
so a crash between two file writes can never leave the files disagreeing for good.

One record is one line::

    <payload length, 8 lowercase hex> <crc32 of payload, 8 lowercase hex> <payload>\\n

The payload is compact JSON, which never holds a raw newline (JSON escapes it), so a record is
exactly one line and the file can be read from either end. Hex is lowercase only: a checksum
that accepted either case would let a case flip pass unnoticed.

A crash can only tear the *tail* (a partial last line). A bad record followed by good ones is
damage, and is reported, never truncated away.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Frame", "Scan", "encode_frame", "read_tail_frames", "scan_frames"]

_HEADER = re.compile(rb"([0-9a-f]{8}) ([0-9a-f]{8}) ")
_HEADER_LEN = 18
_MAX_PAYLOAD = 0xFFFFFFFF
_TAIL_BLOCK = 64 * 1024


def encode_frame(payload: bytes) -> bytes:
    """Frame one record. *payload* must not contain a newline."""
    if b"\n" in payload:
        raise ValueError("a journal payload must not contain a newline")
    if len(payload) > _MAX_PAYLOAD:
        raise ValueError("journal payload too large")
    crc = zlib.crc32(payload)
    return b"%08x %08x " % (len(payload), crc) + payload + b"\n"


def _decode_line(line: bytes) -> bytes | str:
    """The payload of one complete line (without its newline), or why it is invalid."""
    header = _HEADER.match(line)
    if header is None:
        return "bad frame header"
    length = int(header.group(1), 16)
    payload = line[_HEADER_LEN:]
    if len(payload) != length:
        return f"length {len(payload)} does not match header {length}"
    if zlib.crc32(payload) != int(header.group(2), 16):
        return "checksum mismatch"
    return payload


@dataclass(frozen=True, slots=True)
class Frame:
    offset: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Scan:
    """What a forward read of a journal found.

    ``good_end`` is the offset just after the last good record. When the file continues past
    it, ``bad_offset``/``bad_reason`` say where and why; ``damage`` is True when good records
    follow the bad one (corruption in the middle), False for a torn tail.
    """

    frames: list[Frame]
    good_end: int
    bad_offset: int | None = None
    bad_reason: str = ""
    damage: bool = False


def scan_frames(data: bytes, base_offset: int = 0) -> Scan:
    """Read every record of *data* (a journal, or the part of one starting at *base_offset*)."""
    frames: list[Frame] = []
    position = 0
    size = len(data)
    while position < size:
        newline = data.find(b"\n", position)
        if newline < 0:
            return Scan(frames, base_offset + position, base_offset + position, "torn record")
        decoded = _decode_line(data[position:newline])
        if isinstance(decoded, str):
            damage = any(
                not isinstance(_decode_line(line), str)
                for line in data[newline + 1 :].split(b"\n")
                if line
            )
            return Scan(frames, base_offset + position, base_offset + position, decoded, damage)
        frames.append(Frame(base_offset + position, decoded))
        position = newline + 1
    return Scan(frames, base_offset + position)


def read_tail_frames(path: Path, end: int | None = None) -> Iterator[bytes]:
    """Yield the record payloads of *path* newest first, reading backwards in blocks.

    Reads only as much of the file as the caller consumes, so the last N records cost O(N),
    not O(history). *end* limits the read to the file's first *end* bytes. A partial line at
    the very end (a writer in the middle of an append, or a
    crash) is skipped; any other invalid line stops the read with ``ValueError``.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = size if end is None else min(end, size)
        carry = b""
        first = True
        while position > 0:
            start = max(0, position - _TAIL_BLOCK)
            lines = (os.pread(fd, position - start, start) + carry).split(b"\n")
            if first:
                if len(lines) == 1 and start > 0:
                    # No newline in this block: all of it belongs to the torn / in-flight tail.
                    position = start
                    continue
                lines.pop()  # after the last newline: empty, or a torn / in-flight record
                first = False
            # Unless this block starts the file, its first piece may begin in an earlier block.
            carry = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                decoded = _decode_line(line)
                if isinstance(decoded, str):
                    raise ValueError(f"{path}: {decoded} in a record before byte {position}")
                yield decoded
            position = start
    finally:
        os.close(fd)
