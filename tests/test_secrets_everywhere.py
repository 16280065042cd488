"""A request that carries keys leaves them nowhere but in the domain's own storage.

The user types an exchange's keys in a request; the planner plans a side-effecting call with
them, the user approves, the tool stores them in the desk's database. Afterwards every file
the turns wrote (history.json, meta.json, each messages.log and calls.jsonl, the journal),
every row of the ``system_config`` store (TaskState, ExecutionState, step secrets…), every
event of both turns and every span (message contents captured) is searched for the keys: only
the desk's own database may hold them. The desk declares its key formats
(:data:`agentkit_desk.toolset.SECRET_PATTERNS`); what they match in the user's text is masked
before any tool has stored it.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from agentkit import Agent
from agentkit.events import AgentEvent, AskUserEvent, ResultEvent
from agentkit.testing import ScriptedModel
from agentkit_desk import open_desk

API_KEY, SECRET_KEY = "AKEY-7f3a9c21d0", "SKEY-b81d44e0aa"
REQUEST = f"connect binance as main: key {API_KEY} secret {SECRET_KEY}"
ARGS = {"exchange": "binance", "account_name": "main", "api_key": API_KEY, "secret_key": SECRET_KEY}
SCRIPT = {
    "plan": [
        {
            # a goal that copies the request (the model may well do that)
            "goal": REQUEST,
            "steps": [
                {
                    "id": "e1",
                    "type": "tool",
                    "title": f"add binance with {API_KEY}",
                    "tool_name": "create_exchange_config",
                    "tool_args": ARGS,
                },
                {"id": "r1", "type": "respond", "instruction": "Confirm."},
            ],
        }
    ],
    "replan": [{"action": "continue"}],
    # an answer that repeats a key: masked as it streams
    "respond": [f"Saved binance 'main' with key {API_KEY} and secret {SECRET_KEY}."],
}


def _found(text: str) -> list[str]:
    return [secret for secret in (API_KEY, SECRET_KEY) if secret in text]


def _files(root: Path) -> dict[str, list[str]]:
    """Every file under *root* holding a key, but the desk's database (the domain's own
    storage) and the ``system_config`` database (searched row by row)."""
    found = {}
    for path in root.rglob("*"):
        if not path.is_file() or path.name.startswith(("desk.db", "agentkit.db")):
            continue
        hits = _found(path.read_bytes().decode("utf-8", errors="replace"))
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def _rows(database: Path) -> dict[str, list[str]]:
    found = {}
    with sqlite3.connect(database) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):
                hits = _found(json.dumps(row, default=str, ensure_ascii=False))
                if hits:
                    found[f"{table}: {str(row)[:80]}"] = hits
    return found


def test_a_request_with_keys_leaves_them_only_in_the_domains_storage(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    events: list[AgentEvent] = []
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(SCRIPT)) as agent:
        asked = agent.send(REQUEST)
        events += asked.events
        (consent,) = [e for e in asked.events if isinstance(e, AskUserEvent)]
        assert consent.approval_id and consent.tool_args["api_key"] != API_KEY
        conversation = asked.conversation_id
        done = agent.decide(conversation, consent.approval_id, "approve")
        events += done.events
        assert done.result.status == "completed", done.events
        spans = [
            span
            for result in (asked.result, done.result)
            for span in agent.telemetry.recorded(result.trace_id) or []
        ]
        assert spans, "the turns were traced"
        state = agent.execution_state(conversation)
        records = agent.call_records(conversation, done.session.message_id)
    # the tool ran with the real values: the domain's own storage holds them
    with open_desk(data_dir / "agents" / "desk-001" / "workspace") as desk:
        [account] = desk.exchange_configs()
        assert (account.api_key, account.secret_key) == (API_KEY, SECRET_KEY)
    assert state is not None and not _found(state.value.model_dump_json())
    assert "****" in state.value.goal  # the goal names the request, masked
    assert records and not _found(json.dumps([r.model_dump(mode="json") for r in records]))
    assert not [
        (event.type, hits)
        for event in events
        if (hits := _found(json.dumps(event.to_json_dict(), ensure_ascii=False)))
    ]
    assert not [
        (span.name, hits)
        for span in spans
        if (hits := _found(json.dumps(dataclasses.asdict(span), default=str)))
    ]
    answer = next(e for e in done.events if isinstance(e, ResultEvent)).text
    assert "Saved binance" in answer and not _found(answer)
    assert _files(data_dir) == {}
    assert _rows(data_dir / "agentkit.db") == {}
