"""File primitives: atomic replace, append, in-place write, each durable or not.

Why: a plain ``open(path, "w")`` + write leaves a torn or empty file after a crash (measured:
268 of 300 kills, reference/reliability.md). A whole-file rewrite here goes temp file in the
same directory → (fsync) → ``os.replace`` → (fsync of the directory); an append is one
``write`` on an ``O_APPEND`` descriptor (followed by fsync). Short writes are completed, never
ignored. ``sync=False`` skips the fsyncs: a killed process loses nothing the kernel has (the
page cache survives it), only power loss can; the store uses it for views that recovery
rebuilds from the journal, and fsyncs only the journal at its durability points.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = [
    "TEMP_SUFFIX",
    "append_durable",
    "atomic_write",
    "fsync_dir",
    "is_temp_name",
    "make_dirs",
    "pwrite_all",
    "write_all",
]

TEMP_SUFFIX = ".tmp"


def is_temp_name(name: str) -> bool:
    """Names :func:`atomic_write` gives its temp files (``.{target}.{random}.tmp``)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def write_all(fd: int, data: bytes) -> None:
    """Write all of *data* at *fd*'s position (a short write is completed)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (created, renamed, removed names) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace *path* with *data* so that a crash leaves either the old or the new file."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync:
        fsync_dir(path.parent)


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of *data* at *offset* (a short write is completed)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        offset += written
        view = view[written:]


def append_durable(path: Path, data: bytes, *, sync: bool = True) -> int:
    """Append *data* in one ``O_APPEND`` write and fsync; return the file size afterwards.

    When the file is new, its directory is fsynced too, so the name itself survives power loss.
    """
    created = sync and not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return size


def make_dirs(directory: Path) -> None:
    """Create *directory* and its missing parents, each name made durable (its parent fsynced)."""
    missing: list[Path] = []
    path = directory
    while not path.exists():
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir()
        fsync_dir(path.parent)
