"""Stores written before the one conversation layer open unchanged, and verify clean.

tests/fixtures/store_before_layer/ was written by agentkit at 99b35b0, before the stores
became one layer over a journal backend (tests/fixtures/make_store_before_layer.py says how):
a data root in the file store's layout, and a ``pg_dump`` of a PostgreSQL schema, each with
the same conversations (turns with notes, tool calls, usage and checkpoints, a compression
and a reset record, model-call traces, a fork, a turn left ``running`` by a killed writer, an
empty conversation of another agent) and what the old code read back from them. The new code
reads exactly that, verifies them clean, keeps the old bytes as they were, and writes on.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from agentkit.store import ConversationKey, ConversationStore, FileConversationStore
from agentkit.store._records import encode_record
from agentkit.store.conversation_store import CUT_SHORT
from agentkit.types import Message

from tests._postgres import PostgresServer, postgres_server  # noqa: F401 (fixture)
from tests.fixtures.make_store_before_layer import expected as expected_reads

FIXTURES = Path(__file__).parent / "fixtures" / "store_before_layer"
AGENT = "fixture-agent"
HISTORY = ConversationKey(AGENT, "conv-history")
RUNNING = ConversationKey(AGENT, "conv-running")


def _files(root: Path) -> dict[Path, bytes]:
    """Every file under *root* and its bytes (lock files are made on demand, empty)."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"}


def _expected(name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return found


def _writes_on(store: ConversationStore, before: dict[str, Any]) -> None:
    """A new turn on an old conversation, and the turn the old writer left running marked
    failed by the next writer; the old records stay as they were."""
    history, running = HISTORY, RUNNING
    question = Message.user("after the upgrade")
    with store.hold(history):
        store.append(history, question, status="running")
        store.annotate(history, question.message_id, "SESSION", "scenario C")
        reply = Message.assistant("still here", message_id=question.message_id)
        store.append(history, reply, status="completed")
    journal = [encode_record(r).decode() for r in store.journal(history)]
    assert journal[: len(before[str(history)]["journal"])] == before[str(history)]["journal"]
    assert store.messages(history)[-2:] == [question, reply]
    assert "[SESSION]\nscenario C" in store.turn_log(history, question.message_id)

    assert store.meta(running).status == "running"  # reads never write
    with store.hold(running):
        pass
    assert store.meta(running).status == "failed"
    assert f"[ERROR]\n{CUT_SHORT}" in store.turn_log(running, "msg-dead")
    report = store.verify()
    assert report.ok, report.problems
    assert report.conversations == 4


def test_a_data_root_written_before_the_layer_opens_unchanged_and_verifies_clean(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    shutil.copytree(FIXTURES / "data", root)
    files_before = _files(root)
    store = FileConversationStore(root)
    report = store.verify()
    assert report.ok, report.problems
    assert report.conversations == 4
    assert store.recover() == []  # nothing to repair: the views are the journal's, byte for byte
    expected = _expected("expected-files.json")
    assert expected_reads(store) == expected
    assert _files(root) == files_before
    _writes_on(store, expected)
    # the new turn was written the old way too: a fresh store, and verify, agree
    assert FileConversationStore(root).verify().ok


@pytest.fixture
def old_database(postgres_server: PostgresServer) -> str:  # noqa: F811
    """A new schema holding the fixture's dump; the URL that reaches it."""
    psycopg = pytest.importorskip("psycopg")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    dump = (FIXTURES / "postgres.sql").read_text(encoding="utf-8")
    script = "\n".join(
        line.replace("agentkit_fixture", schema)
        for line in dump.splitlines()
        if not line.startswith("\\")  # psql's own commands (\restrict)
    )
    with psycopg.connect(postgres_server.url, autocommit=True) as connection:
        connection.execute(script)
    return f"{postgres_server.url}?options=-csearch_path%3D{schema}"


@pytest.mark.postgres
def test_a_database_written_before_the_layer_opens_unchanged_and_verifies_clean(
    old_database: str,
) -> None:
    from agentkit.store._pg import MIGRATIONS, PostgresDatabase
    from agentkit.store.postgres import PostgresConversationStore

    with PostgresDatabase(old_database) as database:
        assert database.applied() == [name for name, _ in MIGRATIONS]  # no migration needed
        store = PostgresConversationStore(database)
        report = store.verify()
        assert report.ok, report.problems
        assert report.conversations == 4
        assert store.recover(full=True) == []  # every stored metadata is its records' fold
        expected = _expected("expected-postgres.json")
        assert expected_reads(store) == expected
        _writes_on(store, expected)
