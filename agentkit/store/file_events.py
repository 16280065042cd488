"""Running turns' events and cancels on the file store: what every process of
``agentkit serve --workers N`` on one data root can stream or stop.

Events: the process running a turn appends them to ``turn-events.log`` in the conversation's
folder, one line each (``{messageId}\\t{seq}\\t{type}\\t{json}``; the JSON of an event holds
no raw tab or newline), a batch per ``write`` on an ``O_APPEND`` descriptor. A turn's first
event replaces the file (a new file renamed into place), so only the last turn of each
conversation is kept, as on PostgreSQL. A reader takes whole lines only and remembers where
it stopped, so tailing a turn reads only what was added (a replaced file is another file:
read from its start). The file is never fsynced and nothing checks it: the history is what
a turn acknowledged, these lines how it got there (a crash tears at most the last line,
which is skipped; the turn's folder is untouched).

Wake-ups and cancels: each listening process (:meth:`FileTurnEvents.run`) binds a Unix
datagram socket in a directory private to the data root and its user (under the temp
directory, where socket paths stay short), and every append sends a datagram to each other
socket there, as ``NOTIFY`` does on PostgreSQL — followers are woken, never polling. A
wake-up names no turn: the receiver wakes every follower it has, which read their files
again. So a wake-up is never lost: one not sent because the receiver's queue is full finds
datagrams in that queue, sent earlier and read later, whose wake-ups come after this append.
A cancel (``C agent/conversation``) goes to every socket, this process's included, waiting up
to a second for a full queue (a cancel lost so is asked again). A socket whose process died
(kill -9) refuses datagrams and is removed by the sender.

Whether a turn runs anywhere is whether a writer holds the conversation's ``flock`` now,
read from the kernel without taking it (:meth:`~agentkit.store.files.FileJournal.writer_held`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import socket
import stat
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from agentkit.errors import StoreError
from agentkit.layout import TURN_EVENTS_FILE
from agentkit.store._fsio import atomic_write, write_all
from agentkit.store._views import is_turn_events_temp
from agentkit.store.files import FileConversationStore
from agentkit.store.turn_events import StoredEvent, TurnEvents
from agentkit.store.values import ConversationKey

__all__ = ["FileTurnEvents", "socket_dir"]

log = logging.getLogger("agentkit.store")

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
#: what a wake-up datagram says (no turn: the receiver wakes all its followers)
_WAKE = b"E"
_CANCEL = b"C"
_SOCKET_SUFFIX = ".sock"
#: seconds a cancel waits for room in a receiver's queue
_CANCEL_SEND_TIMEOUT = 1.0
#: files whose reading position is kept (the conversations followed lately)
_TAILS_KEPT = 64
#: the longest path of a Unix socket (sun_path, Linux; 104 on macOS), and of a socket's name
#: in its folder (``/{pid}-{8 hex}.sock``)
_SOCKET_PATH_MAX = 104
_LONGEST_NAME = 1 + 10 + 1 + 8 + len(_SOCKET_SUFFIX)


def socket_dir(root: Path) -> Path:
    """The directory of the listening sockets of the servers of data root *root*: private to
    the user (mode 0700, checked), under the temp directory (a socket's path has ~100 bytes)."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"agentkit-turns-{os.getuid()}-{digest}"
    if len(os.fsencode(directory)) + _LONGEST_NAME > _SOCKET_PATH_MAX:
        raise StoreError(
            f"{directory} is too long a folder for the server's sockets (at most "
            f"{_SOCKET_PATH_MAX} bytes a path): set TMPDIR to a shorter one"
        )
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    found = os.lstat(directory)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise StoreError(
            f"{directory} is not a directory private to this user (mode 0700): the server's "
            "processes cannot signal each other safely there"
        )
    return directory


class _Tail:
    """What was read of one version of a file: its first line (it tells a file from a later
    one that got the same inode number), whole lines up to *offset*, their events."""

    __slots__ = ("events", "first", "inode", "offset")

    def __init__(self, inode: int) -> None:
        self.inode = inode
        self.first = b""
        self.offset = 0
        self.events: list[tuple[str, StoredEvent]] = []

    def take(self, data: bytes) -> None:
        """Add the whole lines of *data* (read at :attr:`offset`)."""
        end = data.rfind(b"\n") + 1
        if not end:
            return
        if not self.offset:
            self.first = data[: data.index(b"\n") + 1]
        self.offset += end
        # split at b"\n" only: an event's JSON keeps U+2028, U+2029 and NEL as they are, and
        # str.splitlines would end a line at each
        for raw in data[: end - 1].split(b"\n"):
            parts = raw.decode("utf-8", "replace").split("\t", 3)
            if len(parts) != 4 or not parts[1].isdigit():
                continue  # not a line this module wrote: skipped
            self.events.append((parts[0], StoredEvent(int(parts[1]), parts[2], parts[3])))


class FileTurnEvents(TurnEvents):
    """Turn events and cancels of the conversations of *store*, shared by every process
    serving its data root."""

    blocking = True

    def __init__(self, store: FileConversationStore) -> None:
        super().__init__()
        self.store = store
        self.directory = socket_dir(store.root)
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}{_SOCKET_SUFFIX}"
        # wake-ups never wait for a full queue (non-blocking); cancels wait a second. Two
        # sockets: a socket with a timeout retries a send that would block, whatever its flags
        self._waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._waker.setblocking(False)
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.settimeout(_CANCEL_SEND_TIMEOUT)
        self._tails: OrderedDict[str, _Tail] = OrderedDict()
        self._reading = threading.Lock()

    def _path(self, key: ConversationKey) -> str:
        return os.path.join(self.store.folder(key), TURN_EVENTS_FILE)

    # ------------------------------------------------------------------ events

    def append(self, key: ConversationKey, message_id: str, events: Sequence[StoredEvent]) -> None:
        if not events:
            return
        data = "".join(
            f"{message_id}\t{event.seq}\t{event.type}\t{event.data}\n" for event in events
        ).encode()
        path = self._path(key)
        if events[0].seq == 1:  # a new turn: a new file, the conversation's earlier turn gone
            atomic_write(Path(path), data, sync=False)
            _sweep_temps(os.path.dirname(path))
        else:
            fd = os.open(path, _APPEND)  # no O_CREAT: a turn's file exists from its first event
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
        self._waiters.wake(key.agent_id, key.conversation_id, message_id)
        self._send(_WAKE, wait=False)

    def read(self, key: ConversationKey, message_id: str, after: int = 0) -> list[StoredEvent]:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return []
        try:
            with self._reading:
                tail = self._tail(path, fd)
                return [
                    event for turn, event in tail.events if turn == message_id and event.seq > after
                ]
        finally:
            os.close(fd)

    def _tail(self, path: str, fd: int) -> _Tail:
        """The file open at *fd* read to its last whole line, from where it was left."""
        size = os.fstat(fd).st_size
        inode = os.fstat(fd).st_ino
        tail = self._tails.pop(path, None)
        if (
            tail is None
            or tail.inode != inode
            or size < tail.offset
            or (tail.first and os.pread(fd, len(tail.first), 0) != tail.first)
        ):
            tail = _Tail(inode)
        if size > tail.offset:
            tail.take(os.pread(fd, size - tail.offset, tail.offset))
        self._tails[path] = tail
        while len(self._tails) > _TAILS_KEPT:
            self._tails.popitem(last=False)
        return tail

    # ------------------------------------------------------------------ cancels

    def request_cancel(self, key: ConversationKey) -> None:
        message = _CANCEL + f" {key.agent_id}/{key.conversation_id}".encode()
        self._send(message, wait=True, to_self=True)

    def turn_running(self, key: ConversationKey) -> bool:
        """Does a writer (a turn, in any process) hold the conversation now?"""
        return self.store.backend.writer_held(key)

    # ------------------------------------------------------------------ the sockets

    def _send(self, message: bytes, *, wait: bool, to_self: bool = False) -> None:
        """*message* to every listening process of the data root (this one only with
        *to_self*); without *wait*, a receiver whose queue is full is skipped (see the
        module docstring: it will be woken anyway)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return
        sender = self._sender if wait else self._waker
        for name in names:
            if not name.endswith(_SOCKET_SUFFIX) or (name == self.name and not to_self):
                continue
            path = os.path.join(self.directory, name)
            try:
                sender.sendto(message, path)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):  # its process is gone
                    os.unlink(path)
            except BlockingIOError:
                continue  # its queue is full: what is queued wakes it after this append
            except OSError as error:  # a timeout: its loop is stalled
                log.warning("could not signal %s: %s", name, error)

    async def run(self) -> None:
        """Receive other processes' wake-ups and cancels until cancelled."""
        loop = asyncio.get_running_loop()
        path = os.path.join(self.directory, self.name)
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            receiver.setblocking(False)
            for attempt in range(3):
                socket_dir(self.store.root)  # (again: the last process to close removes it)
                try:
                    receiver.bind(path)
                    break
                except FileNotFoundError:
                    if attempt == 2:
                        raise
            loop.add_reader(receiver.fileno(), self._receive, receiver)
            try:
                self.listening.set()
                await asyncio.Event().wait()
            finally:
                self.listening.clear()
                loop.remove_reader(receiver.fileno())
                with contextlib.suppress(OSError):
                    os.unlink(path)
        finally:
            receiver.close()

    def _receive(self, receiver: socket.socket) -> None:
        woken = False
        while True:
            try:
                message = receiver.recv(512)
            except (BlockingIOError, InterruptedError):
                break
            if message == _WAKE:
                woken = True
            elif message.startswith(_CANCEL + b" "):
                parts = message[2:].decode("utf-8", "replace").split("/")
                try:
                    key = ConversationKey(*parts)
                except (TypeError, ValueError):  # not a datagram this module sent
                    continue
                self._spawn(self._cancelled(key))
        if woken:
            self._waiters.wake_all()

    def close(self) -> None:
        """Close the sending sockets; remove the sockets' folder when no process uses it."""
        self._waker.close()
        self._sender.close()
        with contextlib.suppress(OSError):  # another process's socket is in it: kept
            os.rmdir(self.directory)


def _sweep_temps(directory: str) -> None:
    """Remove the events cache's temp files a killed process left in *directory* (the
    turn's lease is held: no other writer of this conversation's cache is running)."""
    with os.scandir(directory) as entries:
        stale = [entry.path for entry in entries if is_turn_events_temp(entry.name)]
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
