"""A widget turn follows its events: the store reads during it are the turn's own, no more.

The agent runs on the in-memory reference stores with each read counted (the stores are the
real ones; counting is all that is added), and the planner's ExecutionState reads are counted
where the agent's memory serves them. The same turn is run once through ``Agent.send`` (the
turn's own reads) and once through the widget: the widget may add no read, however many events
the turn has.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, InMemoryConversationStore, ScriptedModel
from agentkit.memory import ExecutionState, Versioned
from agentkit.store import InMemoryConfigStore
from lab import ChatPanel, PlanView
from lab.chat_state import conversation_options

#: the conversation store's reads (everything that does not write)
STORE_READS = (
    "exists",
    "conversations",
    "meta",
    "messages",
    "recent",
    "turn_log",
    "checkpoints",
    "last_checkpoint",
    "records",
    "call_records",
    "journal",
    "folder",
)


class Reads:
    """Every read of one agent's stores, by what was read (thread-safe; switchable)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.on = False
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        if self.on:
            with self._lock:
                self.counts[name] += 1

    def during(self, work: Callable[[], Any]) -> Counter[str]:
        """The reads made while *work* runs (to its end)."""
        with self._lock:
            self.counts.clear()
        self.on = True
        try:
            work()
        finally:
            self.on = False
        return Counter(self.counts)


def counting_store(reads: Reads) -> InMemoryConversationStore:
    """The in-memory conversation store, each read counted as ``store.<method>``."""

    class CountingStore(InMemoryConversationStore):
        pass

    def counted(name: str) -> Callable[..., Any]:
        original = getattr(InMemoryConversationStore, name)

        def read(self: InMemoryConversationStore, *args: Any, **kwargs: Any) -> Any:
            reads.add(f"store.{name}")
            return original(self, *args, **kwargs)

        return read

    for name in STORE_READS:
        setattr(CountingStore, name, counted(name))
    return CountingStore()


def counting_config(reads: Reads) -> InMemoryConfigStore:
    """The in-memory config store (TaskState, ExecutionState), each read counted."""

    class CountingConfig(InMemoryConfigStore):
        def get(self, key: str) -> Any:
            reads.add(f"config.get {key.split(':', 1)[0]}")
            return super().get(key)

        def keys(self, prefix: str = "") -> list[str]:
            reads.add("config.keys")
            return super().keys(prefix)

    return CountingConfig()


def count_execution_states(agent: Agent, reads: Reads) -> None:
    """Count the agent memory's ExecutionState loads (served from the store, or from the
    running turn's staged state)."""
    memory = agent.memory
    load = memory.load_execution_state

    def counted(agent_id: str, conversation_id: str) -> Versioned[ExecutionState] | None:
        reads.add("memory.load_execution_state")
        return load(agent_id, conversation_id)

    memory.load_execution_state = counted  # type: ignore[method-assign]


def plan_script() -> dict[str, list[Any]]:
    """Two identical planner turns: list the traders (a tool), replan, answer in pieces."""
    plan = {
        "goal": "list the traders",
        "steps": [
            {"id": "s1", "type": "tool", "title": "List traders", "tool_name": "list_traders"},
            {"id": "s2", "type": "reason", "title": "Think", "instruction": "Think it over."},
            {"id": "s3", "type": "respond", "title": "Answer", "instruction": "Summarise."},
        ],
    }
    return {
        "plan": [plan, plan],
        "replan": [{"action": "continue"}] * 4,
        "reason": ["Nothing to add."] * 2,
        "respond": ["You have no traders yet, none at all."] * 2,
    }


@pytest.fixture
def counted_agent(data_dir: Path) -> Iterator[tuple[Agent, Reads]]:
    reads = Reads()
    agent = Agent.open(
        "desk-001",
        data_dir=data_dir,
        store=counting_store(reads),
        config_store=counting_config(reads),
        model=ScriptedModel(plan_script()),
    )
    count_execution_states(agent, reads)
    with agent:
        yield agent, reads


def test_a_chat_panel_turn_reads_no_more_than_the_turn_itself(
    counted_agent: tuple[Agent, Reads],
) -> None:
    agent, reads = counted_agent
    own = reads.during(lambda: agent.send("list my traders"))
    assert own  # the counting sees the turn's own reads

    panel = ChatPanel(agent)
    assert panel.plan_view is not None
    events: list[Any] = []
    widget = reads.during(lambda: events.extend(_submitted(panel, "list my traders")))
    plan_events = sum(e.type in ("plan", "step_start", "step_complete", "replan") for e in events)
    assert plan_events >= 7  # a turn with many plan events ...
    assert widget - own == Counter()  # ... and not one read more than the turn's own
    # the widgets show the turn: the transcript from its events, the plan from its events
    assert "list my traders" in panel.transcript.value
    assert "You have no traders yet, none at all." in panel.transcript.value
    table = panel.plan_view.table.value
    assert table.count(">done<") == 3 and "list_traders" in table
    assert panel.plan_view.state is not None and panel.plan_view.state.status == "completed"
    conversation = panel.conversation_id
    assert conversation is not None and panel.picker.value == conversation
    assert list(panel.picker.options) == conversation_options(agent.list_conversations())
    # and what they show is what was stored
    stored = [m.content for m in agent.load_conversation_history(conversation)]
    assert [m.content for m in panel.history] == stored
    assert _plan_rows(panel.plan_view.state) == _plan_rows(_stored(agent, conversation))


def _submitted(panel: ChatPanel, text: str) -> list[Any]:
    turn = panel.submit(text)
    assert turn is not None
    return turn.result(timeout=60)


def _stored(agent: Agent, conversation_id: str) -> ExecutionState:
    loaded = agent.execution_state(conversation_id)
    assert loaded is not None
    return loaded.value


def _plan_rows(state: ExecutionState | None) -> list[tuple[str, str, str, str]]:
    assert state is not None
    return [(s.id, s.type, s.status, s.tool_name) for s in state.steps]


def question_script() -> dict[str, list[Any]]:
    """Twice: a question, then (once answered) a write that waits for consent."""
    ask = {
        "goal": "a trader",
        "steps": [{"id": "q1", "type": "ask_user", "title": "Name", "instruction": "Name?"}],
    }
    write = {
        "action": "replace_remaining",
        "steps": [
            {
                "id": "t1",
                "type": "tool",
                "title": "Create it",
                "tool_name": "create_trader",
                "tool_args": {"name": "Gamma", "exchange_id": "ex-1", "model_id": "model-1"},
            }
        ],
    }
    return {"plan": [ask, ask], "replan": [write, write]}


def test_answering_in_a_plan_view_reads_the_pause_once_not_per_event(data_dir: Path) -> None:
    reads = Reads()
    with Agent.open(
        "desk-001",
        data_dir=data_dir,
        store=counting_store(reads),
        config_store=counting_config(reads),
        model=ScriptedModel(question_script()),
    ) as agent:
        count_execution_states(agent, reads)
        first = agent.send("create a trader").conversation_id
        own = reads.during(lambda: agent.send("Gamma on ex-1 with model-1", first))
        second = agent.send("create a trader").conversation_id
        view = PlanView(agent, second)
        assert view.pending is not None and view.pending.kind == "question"
        view.answer_box.value = "Gamma on ex-1 with model-1"
        events: list[Any] = []

        def answer() -> None:
            view.answer_button.click()
            assert view.turn is not None
            events.extend(view.turn.result(timeout=60))

        widget = reads.during(answer)
        assert {"replan", "ask_user", "result"} <= {e.type for e in events}
        # the click reads the stored pause once (it may have been answered elsewhere); the
        # turn's events move the plan on with nothing read
        assert widget - own == Counter(
            {"store.exists": 1, "memory.load_execution_state": 1, "config.get execution_state": 1}
        )
        assert view.pending is not None and view.pending.kind == "confirmation"
        assert "create_trader" in view.table.value and view.table.value.count(">done<") == 1
        assert _plan_rows(view.state) == _plan_rows(_stored(agent, second))
