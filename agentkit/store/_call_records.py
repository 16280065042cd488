"""The file store's call records: ``{messageId}/calls.jsonl`` beside the turn's ``messages.log``.

One ``O_APPEND`` write per record, the file opened on the first record and kept open until
the turn closes its call records: a reader sees whole lines, and a turn of many calls opens the file
once. Not fsynced on its own: the conversation's next commit makes it durable with the rest
of the turn's folder (call records are what a turn left, never something a turn depends on).
"""

from __future__ import annotations

import os
from pathlib import Path

from agentkit.errors import StoreError
from agentkit.store.values import CallRecordSink

__all__ = ["FileCallRecordSink", "read_call_records"]


class FileCallRecordSink(CallRecordSink):
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def append(self, line: str) -> None:
        if "\n" in line:
            raise ValueError("a call record line must not contain a newline")
        data = (line + "\n").encode()
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:  # the turn's folder is made by its first journal commit
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, flags, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_call_records(path: Path) -> list[str]:
    """The lines of a ``calls.jsonl`` (empty when there is none; a torn last line, which a
    crash mid-write leaves, is dropped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise StoreError(f"{path} cannot be read: {error}") from error
    lines = data.split(b"\n")
    if lines and lines[-1]:  # no newline at the end: a write cut short
        lines.pop()
    try:
        return [line.decode() for line in lines if line.strip()]
    except UnicodeDecodeError as error:
        raise StoreError(f"{path} is not UTF-8: {error}") from error
