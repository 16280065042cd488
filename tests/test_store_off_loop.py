"""A turn's durable writes run off the event loop when another turn waits and inline when it
is alone, its lease follows the turn, and durable SQLite writes that arrive together share
one commit.

The store here holds one conversation's durable writes on a gate (a real file store
underneath). With another turn of the process admitted (a bystander holding its
conversation's lease), the first turn's write goes to a store thread: while it waits at the
gate, a turn on another conversation runs to its end, and a turn on the held conversation is
refused as busy. A turn alone in its process writes inline, on the loop's thread. Nothing is
timed: each step waits on an event.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from agentkit import Agent, ConversationBusyError
from agentkit.errors import StoreError
from agentkit.store import ConversationKey, ConversationStore, off_loop
from agentkit.store._records import JournalRecord
from agentkit.store.backend import Lease, held_lease
from agentkit.store.files import FileJournal
from agentkit.store.kv import VersionConflictError
from agentkit.store.sqlite_kv import SqliteConfigStore, _Write
from agentkit.testing import FunctionModel, ModelRequest
from agentkit.types import ConversationMeta, Message

AGENT = "innovator-001"
#: how long a step may wait for the gate before the test reports it never came (a bound
#: against a hang, never reached when the code works: every wait is on an event)
NEVER = 120.0


class GatedJournal(FileJournal):
    """The file journal, whose durable appends to one conversation wait for :attr:`gate`."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gated = ""
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.threads: set[str] = set()

    def append(
        self,
        lease: Lease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        if durable:  # where the durable writes run: never on the event loop's thread
            self.threads.add(threading.current_thread().name)
        if durable and lease.key.conversation_id == self.gated:
            self.entered.set()
            if not self.gate.wait(NEVER):
                raise AssertionError("the gate was never opened")
        super().append(lease, records, meta, durable=durable)


def reply(request: ModelRequest) -> str:
    return "noted"


@asynccontextmanager
async def bystander(store: ConversationStore, key: ConversationKey) -> AsyncIterator[None]:
    """Another turn of this process, admitted for the block (its conversation's lease held
    in a task of its own, as a turn waiting for its model holds it)."""
    taken, done = asyncio.Event(), asyncio.Event()

    async def turn() -> None:
        async with store.ahold(key, timeout=0):
            taken.set()
            await done.wait()

    task = asyncio.create_task(turn())
    await taken.wait()
    try:
        yield
    finally:
        done.set()
        await task


def test_a_held_write_stops_neither_the_loop_nor_another_conversation(data_dir: Path) -> None:
    journal = GatedJournal(data_dir)
    store = ConversationStore(journal)
    agent = Agent.open(AGENT, data_dir=data_dir, store=store, model=FunctionModel(reply))
    held = agent.create_conversation("held").conversation_id
    free = agent.create_conversation("free").conversation_id
    waiting = agent.create_conversation("waiting").conversation_id
    journal.gated = held

    async def drain(conversation: str, text: str) -> list[str]:
        return [event.type async for event in agent.send_message(conversation, text)]

    async def scenario() -> None:
        async with bystander(store, ConversationKey(AGENT, waiting)):
            await contended()
        await agent.aclose()

    async def contended() -> None:
        first = asyncio.create_task(drain(held, "first"))
        # the first turn's durable write has started and waits at the gate, in a thread
        assert await asyncio.to_thread(journal.entered.wait, NEVER)
        assert not first.done()
        # another conversation's turn runs to its end meanwhile, on the same loop
        second = await drain(free, "second")
        assert second[0] == "session" and second[-1] == "result"
        assert [m.content for m in agent.load_conversation_history(free)] == ["second", "noted"]
        # the held conversation is busy: its lease is the first turn's
        with pytest.raises(ConversationBusyError):
            await drain(held, "third")
        assert not first.done()
        journal.gate.set()
        kinds = await first
        assert kinds[-1] == "result"

    asyncio.run(scenario())
    assert [m.content for m in agent.load_conversation_history(held)] == ["first", "noted"]
    assert agent.get_conversation(held).meta.status == "completed"
    assert not any(name.startswith("MainThread") for name in journal.threads)
    assert store.verify().ok


def test_the_lease_is_the_turns_not_the_threads(data_dir: Path) -> None:
    """Two turns on one thread: only the one that took the lease finds it, and the turn
    finds it from the store thread its write runs in."""
    store = ConversationStore(FileJournal(data_dir))
    key = ConversationKey(AGENT, "c1")
    store.create(key, "one")

    async def scenario() -> None:
        taken = asyncio.Event()
        done = asyncio.Event()

        async def holder() -> None:
            async with store.ahold(key, timeout=0):
                assert held_lease(store.backend, key) is not None
                assert await off_loop(held_lease, store.backend, key) is not None
                taken.set()
                await done.wait()
            assert held_lease(store.backend, key) is None

        async def other() -> None:
            await taken.wait()
            assert held_lease(store.backend, key) is None  # same thread, another turn
            with pytest.raises(ConversationBusyError):
                async with store.ahold(key, timeout=0):
                    pass
            done.set()

        await asyncio.gather(holder(), other())
        async with store.ahold(key, timeout=0):  # let go: free again
            pass

    asyncio.run(scenario())
    assert store.verify().ok


def test_a_turn_alone_writes_inline_and_durably(data_dir: Path) -> None:
    """Nobody else waits on the loop: the turn's durable writes run on the loop's thread (no
    hand-off to a store thread), and are acknowledged durable all the same."""
    journal = GatedJournal(data_dir)
    journal.gate.set()  # nothing held: the gate only records where the writes ran
    store = ConversationStore(journal)
    agent = Agent.open(AGENT, data_dir=data_dir, store=store, model=FunctionModel(reply))
    alone = agent.create_conversation("alone").conversation_id
    journal.gated = alone

    async def scenario() -> list[str]:
        kinds = [event.type async for event in agent.send_message(alone, "hello")]
        await agent.aclose()
        return kinds

    assert asyncio.run(scenario())[-1] == "result"
    assert journal.threads == {threading.current_thread().name}  # the loop's: inline
    again = ConversationStore(FileJournal(data_dir))  # as another process reads it
    key = ConversationKey(AGENT, alone)
    assert [m.content for m in again.messages(key)] == ["hello", "noted"]
    assert again.meta(key).status == "completed"
    assert again.verify().ok


def test_where_a_store_call_runs(data_dir: Path) -> None:
    """Inline only for a turn alone in its process: not outside a turn, not beside another
    turn's lease, not while another store call is in a store thread."""
    store = ConversationStore(FileJournal(data_dir))
    mine, other = ConversationKey(AGENT, "mine"), ConversationKey(AGENT, "other")
    store.create(mine, "mine")
    store.create(other, "other")
    loop_thread = threading.current_thread().name

    async def where() -> str:
        return await off_loop(lambda: threading.current_thread().name)

    async def scenario() -> None:
        assert (await where()).startswith("agentkit-store")  # outside a turn: a store thread
        async with store.ahold(mine, timeout=0):
            assert await where() == loop_thread  # alone: inline
            async with bystander(store, other):
                assert (await where()).startswith("agentkit-store")  # another turn waits
            assert await where() == loop_thread
            gate = threading.Event()
            entered = threading.Event()

            def held() -> None:
                entered.set()
                assert gate.wait(NEVER)

            # someone's call outside the turn (a route's listing): in the pool, held there
            in_flight = asyncio.create_task(off_loop(held), context=contextvars.Context())
            assert await asyncio.to_thread(entered.wait, NEVER)
            assert (await where()).startswith("agentkit-store")  # a call is in the pool
            gate.set()
            await in_flight
            assert await where() == loop_thread
        assert (await where()).startswith("agentkit-store")  # let go: outside a turn again

    asyncio.run(scenario())


def test_a_cancelled_turn_waits_for_its_write_in_flight(data_dir: Path) -> None:
    """Cancelling the task that awaits a durable write does not abandon it: the write lands
    (acknowledged in the journal) before the lease is let go."""
    journal = GatedJournal(data_dir)
    store = ConversationStore(journal)
    key = ConversationKey(AGENT, "c2")
    store.create(key, "two")
    journal.gated = key.conversation_id

    store.create(ConversationKey(AGENT, "other"), "other")

    async def scenario() -> None:
        async def turn() -> None:
            async with store.ahold(key, timeout=0):
                await store.aappend(key, Message.user("kept"), status="running")

        async with bystander(store, ConversationKey(AGENT, "other")):  # the write: in a thread
            task = asyncio.create_task(turn())
            assert await asyncio.to_thread(journal.entered.wait, NEVER)
            task.cancel()
            await asyncio.sleep(0)  # the cancellation is delivered while the write is held
            assert not task.done()
            journal.gate.set()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    assert [m.content for m in store.messages(key)] == ["kept"]
    assert store.verify().ok


class HeldFirstCommit(SqliteConfigStore):
    """SQLite whose first group commit waits at a gate, so the writes behind it queue."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.groups: list[list[str]] = []
        self.hold = False

    def _commit_group(self, writes: list[_Write]) -> None:
        if self.hold and not self.entered.is_set():
            self.entered.set()
            if not self.gate.wait(NEVER):
                raise AssertionError("the gate was never opened")
        self.groups.append([write.key for write in writes])
        super()._commit_group(writes)


def test_durable_writes_that_arrive_together_share_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "agentkit.db"
    store = HeldFirstCommit(path)
    outcomes: dict[str, object] = {}

    def write(key: str, expected: int | None) -> None:
        try:
            outcomes[key] = store.set("shared" if key.startswith("cas") else key, {"by": key},
                                      expected_version=expected)  # fmt: skip
        except VersionConflictError as error:
            outcomes[key] = error

    store.set("shared", {"by": "seed"})  # version 1
    seeded = store._commits.commits
    store.hold = True
    first = threading.Thread(target=write, args=("k0", None))
    first.start()
    assert store.entered.wait(NEVER)  # the leader's commit is held: the others queue
    rest = [threading.Thread(target=write, args=(f"k{i}", None)) for i in range(1, 6)]
    rest += [threading.Thread(target=write, args=(f"cas{i}", 1)) for i in range(2)]
    for thread in rest:
        thread.start()
    while len(store._commits._queue) < len(rest):  # all seven queue behind the held commit
        time.sleep(0.001)  # a hang is ended by the suite's per-test timeout, not a clock here
    store.gate.set()
    for thread in [first, *rest]:
        thread.join()
    assert store.groups[-2] == ["k0"]
    assert sorted(store.groups[-1]) == sorted(["shared", "shared", *(f"k{i}" for i in range(1, 6))])
    assert (store._commits.commits - seeded, store._commits.writes - seeded) == (2, 8)
    # one compare-and-swap from version 1 won, the other found version 2
    won = [k for k in ("cas0", "cas1") if not isinstance(outcomes[k], VersionConflictError)]
    assert len(won) == 1
    store.close()
    with SqliteConfigStore(path) as again:  # every acknowledged write is there
        for i in range(6):
            entry = again.get(f"k{i}")
            assert entry is not None and entry.value == {"by": f"k{i}"}
        shared = again.get("shared")
        assert shared is not None and shared.version == 2 and shared.value == {"by": won[0]}


def test_a_failed_group_commit_acknowledges_none_of_its_writes(tmp_path: Path) -> None:
    store = SqliteConfigStore(tmp_path / "agentkit.db", busy_timeout_ms=0)
    other = sqlite3.connect(tmp_path / "agentkit.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the database's write lock
    try:
        with pytest.raises(StoreError):
            store.set("k", {"v": 1})
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.get("k") is None
    assert store.set("k", {"v": 2}).version == 1  # and the next write goes through
    store.close()
