"""A planner turn over an over-long window compresses the older part into TaskState."""

from __future__ import annotations

import json
from pathlib import Path

from agentkit import Agent, Message, ScriptedModel
from agentkit.events import CompressionEvent, ResultEvent
from agentkit.memory import MemoryRepository
from agentkit.store import SqliteConfigStore
from agentkit.store.records import CompressionRecord


def test_an_over_long_window_is_summarised_into_task_state_and_marked(data_dir: Path) -> None:
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["compression"] = {"max_messages": 4, "token_threshold": 10, "keep_recent": 2}
    config_path.write_text(json.dumps(config))
    plan = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
    script = {
        "plan": [plan],
        "respond": ["Noted."],
        "summarize": [
            {"current_goal": "set up trading", "important_facts": ["the user trades on Binance"]}
        ],
    }
    model = ScriptedModel(script)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        cid = agent.create_conversation("long").conversation_id
        for index in range(3):  # the summary's fact is said in the part it summarises
            topic = "the weather" if index != 1 else "trading: I trade on Binance"
            question = Message.user(f"old question {index} about {topic}")
            agent.append_message(cid, question)
            agent.append_message(
                cid, Message.assistant(f"old answer {index}", message_id=question.message_id)
            )
        turn = agent.send("remember that I trade on Binance", cid)
        # compression runs after the result, in the background: not in the turn's events
        assert not [e for e in turn.events if isinstance(e, CompressionEvent)]
        assert isinstance(turn.events[-1], ResultEvent)
        event = agent.wait_upkeep(cid)
        assert event is not None
        assert event.messages_before == 8 and event.messages_after == 2
        assert event.facts_added == 1
        summarize = [r for r in model.requests if r.purpose == "summarize"]
        assert len(summarize) == 1
        sent = "\n".join(m.content for m in summarize[0].messages)
        assert "old question 0" in sent and "old answer 2" in sent  # the older part
        assert "Noted." not in sent and "remember that I trade" not in sent  # not the kept part
        history = agent.load_conversation_history(cid)
        assert all(m.role != "system" for m in history)  # no marker parsed back: a record
        (record,) = agent.conversation_records(cid)
        assert isinstance(record, CompressionRecord)
        assert (record.start, record.summarised, record.kept) == (6, 6, 2)
        assert record.message_id == turn.result.message_id
        assert [m.content for m in agent.chat_window(cid)] == [
            "remember that I trade on Binance",
            history[-1].content,
        ]
        assert "[MEMORY]" in agent.turn_log(cid, turn.result.message_id)

        # The next plan prompt shows the kept messages and TaskState, not the summarised ones.
        turn2 = agent.send("what now?", cid)
        assert turn2.result.status == "completed"
        plan_prompts = [r for r in model.requests if r.purpose == "plan"]
        latest = "\n".join(m.content for m in plan_prompts[-1].messages)
        assert "old question 0" not in latest
        assert "remember that I trade on Binance" in latest
        assert "the user trades on Binance" in latest  # from TaskState
    with SqliteConfigStore(data_dir / "agentkit.db") as kv:
        stored = MemoryRepository(kv).load_task_state("desk-001", cid).value
    assert stored.current_goal == "set up trading"
    assert stored.important_facts == ("the user trades on Binance",)


def _desk_with(data_dir: Path, compression: dict[str, int]) -> None:
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["compression"] = compression
    config_path.write_text(json.dumps(config))


PLAN = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
NO_COMPRESSION = {"max_messages": 100, "token_threshold": 100_000, "keep_recent": 12}


def test_incremental_update_folds_the_latest_messages_into_task_state(data_dir: Path) -> None:
    _desk_with(data_dir, {**NO_COMPRESSION, "incremental_messages": 6})
    script = {
        "plan": [PLAN],
        "respond": ["Noted, Binance it is."],
        "summarize": [{"current_goal": "set up trading", "important_facts": ["trades on Binance"]}],
    }
    model = ScriptedModel(script)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        cid = agent.create_conversation().conversation_id
        agent.save_task_state(
            cid,
            agent.task_state(cid).value.model_copy(update={"pinned_facts": ("budget 100 USDT",)}),
            expected_version=0,
        )
        turn = agent.send("I trade on Binance", cid)
        assert turn.result.status == "completed"
        assert agent.wait_upkeep(cid) is None  # an update, no compression
        state = agent.task_state(cid).value
        assert state.important_facts == ("trades on Binance",)
        assert state.pinned_facts == ("budget 100 USDT",)  # the model cannot drop it
        (request,) = [r for r in model.requests if r.purpose == "summarize"]
        sent = "\n".join(m.content for m in request.messages)
        assert "Latest conversation window" in sent and "I trade on Binance" in sent
        assert "Noted, Binance it is." in sent
        history = agent.load_conversation_history(cid)
        assert [m.role for m in history] == ["user", "assistant"]  # the window is unchanged
        assert not any(isinstance(e, CompressionEvent) for e in turn.events)


def test_incremental_update_is_off_by_default_and_a_bad_summary_changes_nothing(
    data_dir: Path,
) -> None:
    _desk_with(data_dir, NO_COMPRESSION)
    model = ScriptedModel({"plan": [PLAN], "respond": ["ok"], "summarize": [{"x": 1}]})
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        cid = agent.send("hello").conversation_id
        assert [r.purpose for r in model.requests] == ["plan", "respond"]  # no summarize call
    _desk_with(data_dir, {**NO_COMPRESSION, "incremental_messages": 6})
    bad = ScriptedModel({"plan": [PLAN], "respond": ["ok"], "summarize": ["not json at all"]})
    with Agent.open("desk-001", data_dir=data_dir, model=bad) as agent:
        turn = agent.send("hello again", cid)
        assert turn.result.status == "completed"  # the turn itself is not failed by it
        agent.wait_upkeep(cid)
        assert "summarize" in [r.purpose for r in bad.requests]
        assert agent.task_state(cid).version == 0  # nothing written
        assert "task state update" in agent.turn_log(cid, turn.session.message_id)
