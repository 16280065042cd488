"""Every run keeps its transcript in the results table: what the user did, every event of every
turn, the state the expectations read — loaded back as the same typed values."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from agentkit import Agent
from agentkit.errors import UsageError
from agentkit.eval import (
    Transcript,
    load_results,
    load_transcripts,
    run_eval,
    save_results,
)
from agentkit.events import AgentEvent, AskUserEvent, CompressionEvent, ResultEvent

from .test_eval_runs import scenario

CHAT = "chat_sessions_en"  # the chat engine, a restart
CONSENT = "desk_create_trader_en"  # the planner: a question, a consent, "yes"
SIMULATED = "desk_sim_create_trader_en"  # a (scripted) simulated user
COMPRESSED = "memory_compression_facts_en"  # upkeep after the result: a compression event


@pytest.fixture
def emitted(monkeypatch: pytest.MonkeyPatch) -> list[AgentEvent]:
    """Every event the agents of this process emit to their callers, in order."""
    seen: list[AgentEvent] = []
    send, decide = Agent.send_message, Agent.adecide

    async def send_message(self: Agent, *args: Any, **kwargs: Any) -> AsyncIterator[AgentEvent]:
        async for event in send(self, *args, **kwargs):
            seen.append(event)
            yield event

    async def adecide(self: Agent, *args: Any, **kwargs: Any) -> AsyncIterator[AgentEvent]:
        async for event in decide(self, *args, **kwargs):
            seen.append(event)
            yield event

    monkeypatch.setattr(Agent, "send_message", send_message)
    monkeypatch.setattr(Agent, "adecide", adecide)
    return seen


def test_a_sweeps_transcripts_load_back_equal_to_the_events_the_runs_emitted(
    data_dir: Path, tmp_path: Path, emitted: list[AgentEvent]
) -> None:
    chosen = [scenario(name) for name in (CHAT, CONSENT, SIMULATED, COMPRESSED)]
    frame = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    assert frame["passed"].all(), frame["failures"].tolist()
    for table in (
        frame,
        load_results(save_results(frame, tmp_path / "r.parquet")),
        load_results(save_results(frame, tmp_path / "r.csv")),
    ):
        transcripts = load_transcripts(table)
        assert all(isinstance(item, Transcript) for item in transcripts)
        kept = [event for item in transcripts if item is not None for event in item.events()]
        assert kept == emitted  # the same typed events, field for field, in order
    assert len(emitted) > 50
    chat, consent, simulated, compressed = (t for t in load_transcripts(frame) if t is not None)
    # the table links each row to its transcript
    runs = (chat, consent, simulated, compressed)
    for record, item in zip(frame.to_dict("records"), runs, strict=True):
        assert (item.scenario, item.run) == (record["scenario"], f"{record['scenario']}--p0")
        assert item.final is not None and item.final.status == record["final_status"]
        assert sum(isinstance(e, ResultEvent) for e in item.events()) == record["turns"]
    # what the user did
    assert [t.said for t in chat.turns] == [t.user for t in scenario(CHAT).turns]
    assert [t.restart for t in chat.turns] == [t.restart for t in scenario(CHAT).turns]
    assert [t.said for t in simulated.turns] == list(scenario(SIMULATED).user_script)
    asked = [e for e in consent.events() if isinstance(e, AskUserEvent)]
    assert [e.kind for e in asked] == ["question", "confirmation"]
    assert consent.turns[-1].said == "yes"
    # the state the expectations read: after the turns that check their own, and at the end
    checked = [t.after is not None for t in consent.turns]
    assert checked == [not t.expect.is_empty for t in scenario(CONSENT).turns] and any(checked)
    assert consent.final is not None and consent.final.state["desk"]["traders"] == ["Alpha"]
    assert compressed.final is not None
    assert compressed.final.task_state.important_facts  # what compression wrote
    assert isinstance(compressed.events()[-1], CompressionEvent)  # after the turn's result


def test_a_decision_turn_is_recorded_as_a_decision(data_dir: Path) -> None:
    frame = run_eval(
        [scenario("desk_approve_edited_en")], model="scripted", data_dir=data_dir, progress=False
    )
    (transcript,) = load_transcripts(frame)
    assert transcript is not None
    decided = [t for t in transcript.turns if t.decision is not None]
    assert [(t.decision, t.said) for t in decided] == [("approve", "")]
    assert decided[0].args == {"name": "Beta", "exchange_id": "ex-1", "model_id": "model-1"}


def test_a_run_cut_short_keeps_what_it_did(data_dir: Path) -> None:
    frame = run_eval(
        [scenario(CONSENT)], model="scripted", max_model_calls=1, data_dir=data_dir,
        progress=False,
    )  # fmt: skip
    (transcript,) = load_transcripts(frame)
    assert transcript is not None and frame["outcome"].tolist() == ["budget"]
    (turn,) = transcript.turns
    result = turn.events[-1]
    assert isinstance(result, ResultEvent) and result.status == "cancelled"


def test_a_table_without_transcripts_or_with_a_broken_one_is_a_clear_error(
    data_dir: Path,
) -> None:
    frame = run_eval([scenario(CHAT)], model="scripted", data_dir=data_dir, progress=False)
    with pytest.raises(UsageError, match="no transcript column"):
        load_transcripts(frame.drop(columns=["transcript"]))
    broken = frame.copy()
    broken.loc[0, "transcript"] = '{"v": 1, "run": "x"}'
    with pytest.raises(UsageError, match=r"row 0: the transcript is not valid \(scenario"):
        load_transcripts(broken)
    assert load_transcripts(pd.Series([None, ""])) == [None, None]  # kept none
