"""The PostgreSQL stores beyond the contract: schema migrations, the writer lock across
processes, lost connections, fencing, and failing fast without a server.

Every test runs against a real server (tests/_postgres.py), each in a schema of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from agentkit.errors import ConversationBusyError, StoreError
from agentkit.store import ConversationKey
from agentkit.store.base import StaleWriterError, StoreUnavailableError
from agentkit.types import Message

from tests._postgres import PostgresServer, postgres_server, postgres_url  # noqa: F401
from tests.conftest import run_cli

psycopg = pytest.importorskip("psycopg")

from agentkit.store._pg import MIGRATIONS, PostgresDatabase  # noqa: E402
from agentkit.store.postgres import PostgresConversationStore, PostgresJournal  # noqa: E402

pytestmark = pytest.mark.postgres

KEY = ConversationKey("agent-1", "conv-1")


def message(index: int, text: str = "") -> Message:
    return Message(
        role="user",
        content=text or f"question {index}",
        message_id=f"msg-{index:04d}",
        timestamp=datetime(2026, 3, 23, 10, 12, index, tzinfo=UTC),
    )


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresConversationStore]:  # noqa: F811
    with PostgresConversationStore(postgres_url, lock_timeout=5.0) as opened:
        opened.create(KEY, "t")
        yield opened


def holders(url: str) -> list[int]:
    """The backend pids holding an advisory lock (the writer locks)."""
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def terminate(url: str, pid: int) -> None:
    """What a dropped connection or a restart does to a session: the server ends it."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
    while pid in holders(url):  # bounded by the suite's per-test timeout
        time.sleep(0.01)


# ------------------------------------------------------------------ schema


def test_migrations_are_named_applied_once_and_a_newer_schema_is_refused(
    postgres_url: str,  # noqa: F811
) -> None:
    with PostgresDatabase(postgres_url, migrate=False) as database:
        assert database.applied() == []
        assert database.upgrade() == [name for name, _ in MIGRATIONS]
        assert database.upgrade() == []
        assert database.applied() == [name for name, _ in MIGRATIONS]
        with database.connection() as connection:
            connection.execute("INSERT INTO agentkit_migrations (name) VALUES ('9999_future')")
    with pytest.raises(StoreError, match=r"9999_future.*newer agentkit"):
        PostgresDatabase(postgres_url)


def test_db_upgrade_runs_the_migrations_alone(postgres_url: str) -> None:  # noqa: F811
    first = run_cli("db", "upgrade", "--store", postgres_url)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.splitlines()[: len(MIGRATIONS)] == [
        f"applied {name}" for name, _ in MIGRATIONS
    ]
    assert "schema up to date" in first.stdout
    again = run_cli("db", "upgrade", "--store", postgres_url)
    assert again.exit_code == 0
    assert "applied" not in again.stdout.replace("migrations applied", "")
    missing = run_cli("db", "upgrade")
    assert missing.exit_code == 2
    assert "needs --store postgresql://" in missing.stderr


def test_an_unreachable_server_fails_fast_with_a_clear_error(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    from tests._postgres import _free_port

    # an error (not a hang: the per-test timeout would fail it), naming the server
    with pytest.raises(StoreUnavailableError, match="PostgreSQL at postgresql://"):
        PostgresDatabase(f"postgresql://postgres:pw@127.0.0.1:{_free_port()}/x", timeout=1)
    with pytest.raises(StoreUnavailableError) as caught:
        PostgresDatabase(f"postgresql://postgres:secret@127.0.0.1:{_free_port()}/x", timeout=1)
    assert "secret" not in str(caught.value)


# ------------------------------------------------------------------ the writer lock

HOLDER = """
import sys, time
from agentkit.store import ConversationKey
from agentkit.store.postgres import PostgresConversationStore

store = PostgresConversationStore(sys.argv[1])
with store.hold(ConversationKey("agent-1", "conv-1")):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_process_is_busy_until_the_holder_dies(
    store: PostgresConversationStore,
    postgres_url: str,  # noqa: F811
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), postgres_url],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            _busy_then_free(store, child)
        finally:
            child.kill()


def _busy_then_free(store: PostgresConversationStore, child: subprocess.Popen[str]) -> None:
    """The child holds the conversation: busy here, until it is killed."""
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    epoch = store.backend.leases.current_epoch(KEY)
    with pytest.raises(ConversationBusyError), store.hold(KEY, timeout=0):
        pass
    store.lock_timeout = 0.3
    started = time.monotonic()
    with pytest.raises(ConversationBusyError):  # a write outside a turn waits, then gives up
        store.append(KEY, message(1))
    assert time.monotonic() - started >= 0.25
    os.kill(child.pid, signal.SIGKILL)  # a replica dies mid-turn: its session ends
    child.wait()
    with store.hold(KEY, timeout=10):  # the lock went with it
        store.append(KEY, message(2))
    assert store.backend.leases.current_epoch(KEY) == epoch + 1
    assert [m.content for m in store.messages(KEY)] == ["question 2"]


def test_a_writer_that_lost_its_connection_takes_the_lock_back_when_nobody_took_over(
    store: PostgresConversationStore,
    postgres_url: str,  # noqa: F811
) -> None:
    with store.hold(KEY):
        store.append(KEY, message(1))
        (pid,) = holders(postgres_url)
        terminate(postgres_url, pid)  # the lock is gone; nobody else wanted it
        store.annotate(KEY, "msg-0002", "SESSION", "after the loss")
        store.append(KEY, message(2), status="running")
        (again,) = holders(postgres_url)
        assert again != pid  # held again, on a new connection
    assert holders(postgres_url) == []
    assert [m.content for m in store.messages(KEY)] == ["question 1", "question 2"]
    assert store.meta(KEY).status == "running"
    assert "after the loss" in store.turn_log(KEY, "msg-0002")
    assert store.verify().ok


def test_a_lease_whose_epoch_bump_a_server_crash_lost_is_unavailable_not_stale(
    store: PostgresConversationStore,
    postgres_url: str,  # noqa: F811
) -> None:
    """A turn's epoch bump is committed without a flush; a crash of the server (restart -m
    immediate) can lose it with the session. The writer that then takes its lock back finds
    the epoch lower than its own: nobody took over, but its lease is gone — a retryable
    store_unavailable (HTTP 503), never a stale-writer store_error (500)."""
    with store.hold(KEY):
        store.append(KEY, message(1))
        epoch = store.backend.leases.current_epoch(KEY)
        (pid,) = holders(postgres_url)
        with psycopg.connect(postgres_url, autocommit=True) as connection:  # the lost bump
            connection.execute(
                "UPDATE conversations SET epoch = epoch - 1 "
                "WHERE agent_id = %s AND conversation_id = %s",
                (KEY.agent_id, KEY.conversation_id),
            )
        terminate(postgres_url, pid)  # … and the session with it
        with pytest.raises(StoreUnavailableError) as caught:
            store.append(KEY, message(2))
        assert not isinstance(caught.value, StaleWriterError)
    assert store.backend.leases.current_epoch(KEY) == epoch - 1
    with store.hold(KEY, timeout=5):  # a retry is admitted and writes
        store.append(KEY, message(2))
    assert [m.content for m in store.messages(KEY)] == ["question 1", "question 2"]
    assert store.verify().ok


def test_a_stale_epoch_is_refused_after_another_writer_took_over(
    store: PostgresConversationStore,
    postgres_url: str,  # noqa: F811
) -> None:
    """A turn is paused, its lock stolen (its session ended, another replica takes the
    conversation and writes), then it tries to write: refused, nothing of it stored."""
    with PostgresConversationStore(postgres_url, lock_timeout=5.0) as other:
        with store.hold(KEY):
            store.append(KEY, message(1, "the first turn"))
            (pid,) = holders(postgres_url)
            terminate(postgres_url, pid)
            took = threading.Event()
            done = threading.Event()

            def replica() -> None:
                with other.hold(KEY, timeout=5):
                    other.append(KEY, message(2, "the other replica's turn"))
                    took.set()
                    done.wait(10)

            thread = threading.Thread(target=replica)
            thread.start()
            try:
                assert took.wait(10)
                with pytest.raises(StaleWriterError) as caught:  # while the other holds it
                    store.append(KEY, message(3, "stale while held"))
                assert caught.value.current == caught.value.epoch + 1
                assert caught.value.conversation_id == "conv-1"
            finally:
                done.set()
                thread.join()
            with pytest.raises(StaleWriterError):  # and after it let go
                store.set_status(KEY, "completed")
            with pytest.raises(StaleWriterError):
                store.delete(KEY)
        assert holders(postgres_url) == []
        contents = [m.content for m in other.messages(KEY)]
        assert contents == ["the first turn", "the other replica's turn"]
        assert other.meta(KEY).status == "idle"
        with store.hold(KEY, timeout=0):  # the stale writer's store is usable again
            store.set_status(KEY, "completed")
    assert store.verify().ok


def test_a_write_whose_commit_outcome_was_lost_is_not_written_twice(
    store: PostgresConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PostgresJournal._append_fenced
    failures: list[str] = []

    def commit_then_drop(self: PostgresJournal, connection, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        if failures:
            return real(self, connection, *args, **kwargs)
        real(self, connection, *args, **kwargs)  # committed …
        failures.append("dropped")
        connection.close()  # … but the answer never came back
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PostgresJournal, "_append_fenced", commit_then_drop)
    with store.hold(KEY):
        meta = store.append(KEY, message(1))
        store.append(KEY, message(2))
    assert failures == ["dropped"]
    assert meta.stats.message_count == 1
    assert [m.content for m in store.messages(KEY)] == ["question 1", "question 2"]
    assert store.verify().ok


def test_a_write_that_failed_before_committing_is_written_once_on_the_new_connection(
    store: PostgresConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PostgresJournal._append_fenced
    failures: list[str] = []

    def drop_first(self: PostgresJournal, connection, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        if not failures:
            failures.append("dropped")
            connection.close()
            raise psycopg.OperationalError("the connection is closed")
        return real(self, connection, *args, **kwargs)

    monkeypatch.setattr(PostgresJournal, "_append_fenced", drop_first)
    with store.hold(KEY):
        assert store.append(KEY, message(1)).stats.message_count == 1
    assert [m.content for m in store.messages(KEY)] == ["question 1"]


def test_a_server_restart_fails_fast_and_the_store_recovers_without_reopening(
    postgres_server: PostgresServer,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    with (
        PostgresDatabase(postgres_url, timeout=1) as database,
        PostgresConversationStore(database) as store,
    ):
        store.create(KEY, "t")
        with store.hold(KEY):
            store.append(KEY, message(1))  # durable: so is the epoch the hold took
            postgres_server.ctl("stop", "-m", "immediate")
            try:
                # (the holder's own metadata needs no server: it is the lease's)
                assert store.meta(KEY).stats.message_count == 1
                with pytest.raises(StoreUnavailableError, match="gave no connection"):
                    store.messages(KEY)
                with pytest.raises(StoreUnavailableError):  # not acknowledged
                    store.append(KEY, message(2, "lost"))
            finally:
                postgres_server.start()
            while True:  # the pool reconnects by itself (backing off); no reopening
                try:  # (bounded by the per-test timeout)
                    store.append(KEY, message(3))  # the lock taken back, same epoch
                    break
                except StoreUnavailableError:
                    time.sleep(0.2)
        assert [m.content for m in store.messages(KEY)] == ["question 1", "question 3"]
        assert store.verify().ok


def test_a_turn_beyond_max_turns_is_refused_at_once(postgres_url: str) -> None:  # noqa: F811
    other = ConversationKey("agent-1", "conv-2")
    with (
        PostgresDatabase(postgres_url, max_turns=1) as database,
        PostgresConversationStore(database) as store,
    ):
        store.create(KEY, "t")
        store.create(other, "t")
        with store.hold(KEY):  # refused (not queued: a queued hold would block here)
            with pytest.raises(StoreUnavailableError, match="max_turns"), store.hold(other):
                pass
            store.append(other, message(1))  # a write outside a turn uses the other pool
        with store.hold(other):  # the connection came back
            store.append(other, message(2))
        assert len(store.messages(other)) == 2


def test_a_turn_alone_still_sends_its_calls_to_a_store_thread(
    store: PostgresConversationStore,
) -> None:
    """Inline store calls are for local stores only: a PostgreSQL call is a round trip whose
    time the network decides, so even a turn alone in its process never makes it on the loop
    (agentkit.store._offload)."""
    import asyncio

    from agentkit.store import off_loop

    key = ConversationKey("a-1", "alone")
    store.create(key, "alone")
    loop_thread = threading.current_thread().name

    async def scenario() -> list[str]:
        async with store.ahold(key, timeout=0):
            where = await off_loop(lambda: threading.current_thread().name)
            await store.aappend(key, Message.user("kept"), status="running")
            await store.aset_status(key, "completed")
        return [where]

    (where,) = asyncio.run(scenario())
    assert where != loop_thread and where.startswith("agentkit-store")
    assert [m.content for m in store.messages(key)] == ["kept"]
    assert store.verify().ok
