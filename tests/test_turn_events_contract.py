"""One contract for every place running turns' events and cancels live
(:class:`agentkit.store.turn_events.TurnEvents`): the in-process reference, the file store's
files and sockets (``agentkit serve --workers N``) and PostgreSQL.

Each case runs a *writer* (the process running the turn) and a *reader* (another process
serving the same store: a second instance on the same data root or database; the reference
has one process, so both are the same instance). Whatever the implementation: events read
back in order after any position, a new turn forgets the conversation's earlier one, a
follower on the reader replays then is woken for each append until ``result`` (never by
polling: its idle re-read is an hour away) or the end mark, a cancel asked on the reader
reaches the writer's handler, and a held conversation reads as running from the other
process where the store can tell.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from agentkit.errors import StoreError
from agentkit.events import AgentOutputEvent
from agentkit.layout import TURN_EVENTS_FILE
from agentkit.store import ConversationKey
from agentkit.store.choice import FILES, OpenedStores, open_stores
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.file_events import FileTurnEvents, socket_dir
from agentkit.store.turn_events import END, InMemoryTurnEvents, StoredEvent, TurnEvents, follow

from tests._postgres import PostgresServer, fresh_url, postgres_server  # noqa: F401

T = TypeVar("T")
KEY = ConversationKey("agent-1", "conv-1")
NEVER = 3600.0  # a follower's idle re-read: only a wake-up can deliver within a test


def stored(seq: int, kind: str = "agent_output") -> StoredEvent:
    return StoredEvent(seq, kind, f'{{"n": {seq}, "text": "tab\\there"}}')


@dataclass
class Pair:
    writer: TurnEvents
    reader: TurnEvents
    store: ConversationStore | None  # holds KEY's writer lock (None: the reference)
    shared: bool  # the reader is another process: it can tell the writer holds KEY


@pytest.fixture(params=["memory", "files", pytest.param("postgres", marks=pytest.mark.postgres)])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    if request.param == "memory":
        events = InMemoryTurnEvents()
        yield Pair(events, events, None, shared=False)
        return
    if request.param == "files":
        spec = FILES
    else:
        pytest.importorskip("psycopg")
        spec = fresh_url(request.getfixturevalue("postgres_server"))
    opened: list[OpenedStores] = [open_stores(spec, tmp_path, processes=2) for _ in range(2)]
    try:
        writer, reader = opened
        writer.conversations.create(KEY, "contract")
        assert writer.events is not None and reader.events is not None
        yield Pair(writer.events, reader.events, writer.conversations, shared=True)
    finally:
        for stores in opened:
            stores.close()


@asynccontextmanager
async def listening(pair: Pair) -> AsyncIterator[None]:
    """Both sides receive other processes' wake-ups and cancels (their ``run``), once ready."""
    sides = list({id(pair.writer): pair.writer, id(pair.reader): pair.reader}.values())
    tasks = [asyncio.create_task(side.run()) for side in sides]
    try:
        for side in sides:
            await side.listening.wait()
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def listened(pair: Pair, scenario: Callable[[], Awaitable[T]]) -> T:
    async with listening(pair):
        return await scenario()


async def collect(events: TurnEvents, after: int = 0, *, message_id: str = "msg-1") -> list[int]:
    async def alive() -> bool:
        return True

    found = follow(events, KEY, message_id, after, alive=alive, idle=NEVER)
    return [event.seq async for event in found]


def test_events_read_back_in_order_after_any_position(pair: Pair) -> None:
    pair.writer.append(KEY, "msg-1", [stored(1, "session"), stored(2)])
    pair.writer.append(KEY, "msg-1", [stored(3), stored(4, "result")])
    assert pair.reader.read(KEY, "msg-1") == [stored(1, "session"), stored(2), stored(3),
                                              stored(4, "result")]  # fmt: skip
    assert [e.seq for e in pair.reader.read(KEY, "msg-1", after=2)] == [3, 4]
    assert pair.reader.read(KEY, "msg-1", after=4) == []
    assert pair.reader.read(KEY, "msg-other") == []


def test_an_event_text_with_unicode_line_breaks_reads_back_whole(pair: Pair) -> None:
    """``to_json`` keeps non-ASCII as is: U+2028, U+2029 and NEL are no line ends here."""
    data = AgentOutputEvent(text="a\u2028b\u2029c\x85d\x1ce").to_json()
    said = StoredEvent(2, "agent_output", data)
    pair.writer.append(KEY, "msg-1", [stored(1, "session"), said, stored(3)])
    assert pair.reader.read(KEY, "msg-1") == [stored(1, "session"), said, stored(3)]


def test_a_new_turn_forgets_the_conversations_earlier_one(pair: Pair) -> None:
    pair.writer.append(KEY, "msg-1", [stored(1, "session"), stored(2, "result")])
    assert [e.seq for e in pair.reader.read(KEY, "msg-1")] == [1, 2]
    pair.writer.append(KEY, "msg-2", [stored(1, "session")])
    assert pair.reader.read(KEY, "msg-1") == []
    assert [e.seq for e in pair.reader.read(KEY, "msg-2")] == [1]
    pair.writer.append(KEY, "msg-2", [stored(2)])
    assert [e.seq for e in pair.reader.read(KEY, "msg-2", after=1)] == [2]


def test_a_follower_replays_then_is_woken_for_each_append_until_the_result(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = pair.reader.read
    idle: asyncio.Queue[None] = asyncio.Queue()  # one item per read that found nothing new
    loop: asyncio.AbstractEventLoop | None = None

    def counted(key: ConversationKey, message_id: str, after: int = 0) -> list[StoredEvent]:
        found = read(key, message_id, after)  # (in a thread for a blocking store)
        if not found and loop is not None:
            loop.call_soon_threadsafe(idle.put_nowait, None)
        return found

    monkeypatch.setattr(pair.reader, "read", counted)

    async def waiting() -> None:
        """Until the follower found nothing new and waits to be woken."""
        await idle.get()
        for _ in range(3):
            await asyncio.sleep(0)

    async def scenario() -> list[int]:
        nonlocal loop
        loop = asyncio.get_running_loop()
        await append(pair.writer, [stored(1, "session"), stored(2)])
        follower = asyncio.create_task(collect(pair.reader, after=1))
        for seq in (3, 4):
            await waiting()  # so only a wake-up from the writer's process can deliver it
            await append(pair.writer, [stored(seq)])
        await waiting()
        await append(pair.writer, [stored(5, "result"), stored(6)])
        return await follower  # a follower never woken fails at the test's timeout

    assert asyncio.run(listened(pair, scenario)) == [2, 3, 4, 5]


def test_a_follower_stops_at_the_end_mark(pair: Pair) -> None:
    async def scenario() -> list[int]:
        await append(pair.writer, [stored(1, "session")])
        follower = asyncio.create_task(collect(pair.reader))
        await append(pair.writer, [stored(2), stored(3, END)])
        return await follower

    assert asyncio.run(listened(pair, scenario)) == [1, 2]


def test_a_cancel_asked_on_the_reader_reaches_the_writer(pair: Pair) -> None:
    async def scenario() -> ConversationKey:
        heard: asyncio.Future[ConversationKey] = asyncio.get_running_loop().create_future()

        async def handler(key: ConversationKey) -> None:
            if not heard.done():
                heard.set_result(key)

        pair.writer.on_cancel(handler)
        await asyncio.to_thread(pair.reader.request_cancel, KEY)
        return await heard

    assert asyncio.run(listened(pair, scenario)) == KEY


def test_a_held_conversation_is_running_for_the_other_process(pair: Pair) -> None:
    assert not pair.reader.turn_running(KEY)
    if pair.store is None:
        return  # the reference holds only its own process's turns: never "elsewhere"
    with pair.store.hold(KEY, timeout=10):
        assert pair.reader.turn_running(KEY) is pair.shared
    assert not pair.reader.turn_running(KEY)


async def append(events: TurnEvents, batch: list[StoredEvent]) -> None:
    if events.blocking:
        await asyncio.to_thread(events.append, KEY, "msg-1", batch)
    else:
        events.append(KEY, "msg-1", batch)


# -- the file store's own cases -------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[FileTurnEvents, FileTurnEvents]]:
    """Two processes' events on the file store of one data root (KEY created)."""
    opened = [open_stores(FILES, tmp_path, processes=2) for _ in range(2)]
    try:
        opened[0].conversations.create(KEY, "files")
        writer, reader = (stores.events for stores in opened)
        assert isinstance(writer, FileTurnEvents) and isinstance(reader, FileTurnEvents)
        yield writer, reader
    finally:
        for stores in opened:
            stores.close()


def test_one_process_on_the_file_store_keeps_its_events_in_memory(tmp_path: Path) -> None:
    assert open_stores(FILES, tmp_path).events is None  # the server then uses the reference
    several = open_stores(FILES, tmp_path, processes=2)
    assert isinstance(several.events, FileTurnEvents)
    several.close()


def test_a_torn_or_foreign_line_is_skipped_and_a_replaced_file_read_from_its_start(
    files: tuple[FileTurnEvents, FileTurnEvents],
) -> None:
    writer, reader = files
    writer.append(KEY, "msg-1", [stored(1, "session")])
    path = writer.store.folder(KEY) / TURN_EVENTS_FILE
    with path.open("ab") as handle:
        handle.write(b'not an event line\nmsg-1\t2\tagent_output\t{"n": 2, "te')  # torn
    assert [e.seq for e in reader.read(KEY, "msg-1")] == [1]
    with path.open("ab") as handle:
        handle.write(b'xt": ""}\n')  # the torn line, completed
    assert [e.seq for e in reader.read(KEY, "msg-1")] == [1, 2]
    # a new turn's file, longer than what the reader had read: read from its start
    writer.append(KEY, "msg-2", [stored(n, "session" if n == 1 else "x") for n in range(1, 9)])
    assert [e.seq for e in reader.read(KEY, "msg-2")] == list(range(1, 9))
    assert reader.read(KEY, "msg-1") == []


def test_a_dead_process_socket_is_removed_and_a_bad_socket_dir_refused(
    tmp_path: Path, files: tuple[FileTurnEvents, FileTurnEvents], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, _reader = files
    dead = writer.directory / f"{os.getpid()}-dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as gone:
        gone.bind(str(dead))  # bound, then closed: as a kill -9 leaves it
    assert dead.exists()
    writer.append(KEY, "msg-1", [stored(1, "session")])
    assert not dead.exists()
    writer.directory.chmod(0o755)  # opened to other users: refused, with the reason
    try:
        with pytest.raises(StoreError, match="not a directory private to this user"):
            socket_dir(tmp_path)
    finally:
        writer.directory.chmod(0o700)
    assert stat.S_IMODE(os.stat(socket_dir(tmp_path)).st_mode) == 0o700
    long = tmp_path / ("x" * 90)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    with pytest.raises(StoreError, match="set TMPDIR to a shorter one"):
        socket_dir(tmp_path)


def test_a_wake_up_never_waits_for_a_full_queue(
    files: tuple[FileTurnEvents, FileTurnEvents], caplog: pytest.LogCaptureFixture
) -> None:
    """A process whose loop does not read (its queue full) is skipped, never waited for:
    what is queued wakes it after these appends anyway."""
    writer, _reader = files
    stalled = writer.directory / f"{os.getpid()}-stalled.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as peer:
        peer.bind(str(stalled))
        try:
            with caplog.at_level("WARNING", logger="agentkit.store"):
                for seq in range(1, 40):  # the kernel queues ~10 datagrams per socket
                    writer.append(KEY, "msg-1", [stored(seq, "session" if seq == 1 else "x")])
            assert peer.recv(16) == b"E"  # it was woken, before its queue filled
        finally:
            stalled.unlink()
    assert not [r for r in caplog.records if "could not signal" in r.getMessage()]
