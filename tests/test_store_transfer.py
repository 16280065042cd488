"""``agentkit export`` / ``agentkit import``: file → PostgreSQL → file gives the same files.

The conversations are made by real planner turns (a scripted model from the kit): messages,
statuses, notes, checkpoints, a compression record, model-call traces and the memory in
``system_config``; the exported folders are compared byte for byte with the data root's.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ScriptedModel
from agentkit.layout import CONFIG_DB
from agentkit.memory import TaskState
from agentkit.store import ConversationKey, FileConversationStore, SqliteConfigStore
from agentkit.store.records import CompressionRecord
from agentkit.types import utc_now

from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)
from tests.conftest import run_cli, tree

AGENT = "desk-001"
PLAN = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}


def _conversation_files(root: Path) -> dict[str, bytes]:
    """Every file of every conversation under a data root, by its relative path."""
    found: dict[str, bytes] = {}
    for path in sorted(root.glob("agents/*/conversations/*/**/*")):
        if path.is_file():
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def _config_rows(database: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(database) as connection:
        return connection.execute(
            "SELECT key, value, version, updated_at FROM system_config ORDER BY key"
        ).fetchall()


@pytest.fixture
def made(data_dir: Path) -> tuple[Path, list[str]]:
    """Two conversations of desk-001 made by planner turns, one with a compression record
    and a TaskState."""
    script = {"plan": [PLAN] * 6, "respond": ["Noted."] * 6}
    with Agent.open(AGENT, data_dir=data_dir, model=ScriptedModel(script)) as agent:
        first = agent.send("the launch is on March 14").conversation_id
        agent.send("we meet in Lisbon", first)
        last = agent.send("what now?", first).result.message_id
        second = agent.send("你好").conversation_id
        record = CompressionRecord(
            message_id=last, at=utc_now(), start=4, summarised=4, kept=2, strategy="extractive"
        )
        agent.runtime.store.add_record(ConversationKey(AGENT, first), record)
        stored = agent.task_state(first)
        agent.save_task_state(
            first,
            TaskState(current_goal="plan the launch", important_facts=("March 14",)),
            expected_version=stored.version,
        )
    return data_dir, [first, second]


def test_file_to_postgres_to_file_gives_the_same_files(
    made: tuple[Path, list[str]],
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    root, conversations = made
    first_export, second_export = tmp_path / "one", tmp_path / "two"
    out = run_cli("--data-dir", str(root), "export", "--to", str(first_export))
    assert out.exit_code == 0, out.stderr
    assert "exported 2 conversations" in out.stdout
    # the export is the file store's own layout: the very files of the data root
    assert _conversation_files(first_export) == _conversation_files(root)
    assert any(name.endswith("calls.jsonl") for name in _conversation_files(root))

    loaded = run_cli("--data-dir", str(root), "import", str(first_export), "--store", postgres_url)
    assert loaded.exit_code == 0, loaded.stderr
    assert "imported 2 conversations" in loaded.stdout
    out = run_cli(
        "--data-dir", str(root), "export", "--store", postgres_url, "--to", str(second_export)
    )
    assert out.exit_code == 0, out.stderr
    assert _conversation_files(second_export) == _conversation_files(first_export)
    assert _config_rows(second_export / CONFIG_DB) == _config_rows(root / CONFIG_DB)

    # the PostgreSQL copy is a working store: same history, checkpoints, records, memory
    with (
        Agent.open(AGENT, data_dir=root, store=postgres_url, model=ScriptedModel({})) as pg,
        Agent.open(AGENT, data_dir=root, model=ScriptedModel({})) as files,
    ):
        for cid in conversations:
            assert pg.load_conversation_history(cid) == files.load_conversation_history(cid)
            key = ConversationKey(AGENT, cid)
            assert pg.store.checkpoints(key) == files.store.checkpoints(key)
            assert pg.conversation_records(cid) == files.conversation_records(cid)
            assert pg.task_state(cid) == files.task_state(cid)
            assert pg.chat_window(cid) == files.chat_window(cid)
    verified = run_cli("--data-dir", str(root), "verify", "--store", postgres_url)
    assert verified.exit_code == 0 and "0 problems" in verified.stdout


def test_an_import_over_existing_conversations_is_refused_and_writes_nothing(
    made: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, conversations = made
    export = tmp_path / "export"
    assert run_cli("--data-dir", str(root), "export", "--to", str(export), AGENT).exit_code == 0
    other = tmp_path / "other"
    (other / "agents").mkdir(parents=True)
    shutil.copytree(
        root / "agents" / AGENT,
        other / "agents" / AGENT,
        ignore=shutil.ignore_patterns("conversations"),
    )
    store = FileConversationStore(other)
    store.create(ConversationKey(AGENT, conversations[1]), "already here")
    SqliteConfigStore(other / CONFIG_DB).close()  # a data root in use has its system_config
    before = tree(other)
    refused = run_cli("--data-dir", str(other), "import", str(export))
    assert refused.exit_code == 2
    assert "already has" in refused.stderr and conversations[1] in refused.stderr
    assert tree(other) == before


def test_bad_export_and_import_requests_are_clear_errors(
    made: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = made
    unknown = run_cli("--data-dir", str(root), "export", "--to", str(tmp_path / "x"), "nobody-1")
    assert unknown.exit_code == 2 and "nobody-1" in unknown.stderr
    assert not (tmp_path / "x").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "something").write_text("x")
    full = run_cli("--data-dir", str(root), "export", "--to", str(busy))
    assert full.exit_code == 2 and "not empty" in full.stderr
    empty = run_cli("--data-dir", str(root), "import", str(tmp_path / "nothing"))
    assert empty.exit_code == 2 and "holds no export" in empty.stderr
