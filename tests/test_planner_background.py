"""Memory upkeep off the answer's path: the result first, the compression after it.

A planner turn an Agent runs yields ``result`` once its answer is durable; the incremental
TaskState update and the compression then run as a background job holding the
conversation (the registry of running turns and the store's writer lock). What must hold:

* the summariser's request comes after the ``result`` event, with the answer already stored;
* the next turn of the conversation waits for the job and plans on the compressed state;
* another process sees TaskState old or new, never the update without the compression, and
  cannot start a turn meanwhile (the writer lock is held);
* a SIGKILL in the middle (during the summary, or between TaskState and the record) loses
  no acknowledged message, and a kill before TaskState is written leaves it as it was;
* ``agent.aclose()`` waits for the job; past ``compression.wait_seconds`` it is cancelled
  and nothing of it is written.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, Message
from agentkit.errors import ConversationBusyError
from agentkit.events import AgentEvent, CompressionEvent, ResultEvent
from agentkit.memory import MemoryRepository, TaskState
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store.records import CompressionRecord
from agentkit.store.sqlite_kv import SqliteConfigStore

from ._processes import fork_call, wait_exit

AGENT = "keeper"
PLAN = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
COMPRESSION = {"max_messages": 4, "token_threshold": 10, "keep_recent": 2}
UPDATED = {"current_goal": "set up trading", "important_facts": ["I trade on Binance"]}
COMPRESSED = {
    "current_goal": "set up trading",
    "important_facts": ["I trade on Binance", "budget 3000 USDT"],
}


def make_root(tmp_path: Path, compression: dict[str, Any] | None = None) -> tuple[Path, str]:
    """An agent over the file store, and a conversation whose window is over N and T."""
    root = tmp_path / "data"
    folder = root / "agents" / AGENT
    folder.mkdir(parents=True)
    config = {"engine": "planner", "compression": compression or COMPRESSION}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with Agent.open(AGENT, data_dir=root, model=FunctionModel(lambda _r: "")) as agent:
        cid = agent.create_conversation("long").conversation_id
        said = ("I trade on Binance", "my budget is 3000 USDT", "what's new?")
        for index, text in enumerate(said):
            question = Message.user(text)
            agent.append_message(cid, question)
            agent.append_message(
                cid, Message.assistant(f"old answer {index}", message_id=question.message_id)
            )
    return root, cid


def replies(summaries: dict[str, Any], log: list[str]) -> Callable[[ModelRequest], Any]:
    """plan → PLAN, respond → "Noted.", summarize → *summaries* by transcript title."""

    def reply(request: ModelRequest) -> Any:
        log.append(request.purpose)
        if request.purpose == "plan":
            return PLAN
        if request.purpose == "summarize":
            sent = request.messages[-1].content
            return summaries["update" if "Latest conversation window" in sent else "archive"]
        return "Noted."

    return reply


def task_state_of(root: Path, cid: str) -> tuple[TaskState, int]:
    with SqliteConfigStore(root / "agentkit.db") as kv:
        stored = MemoryRepository(kv).load_task_state(AGENT, cid)
    return stored.value, stored.version


def test_the_result_comes_before_the_summarisers_request(tmp_path: Path) -> None:
    root, cid = make_root(tmp_path)
    log: list[str] = []
    seen_by_summariser: list[list[str]] = []
    reply = replies({"archive": COMPRESSED}, log)

    def recording(request: ModelRequest) -> Any:
        if request.purpose == "summarize":  # what is stored when the summary is asked for
            store = FileConversationStore(root)
            seen_by_summariser.append([m.content for m in store.messages(key)])
        return reply(request)

    key = ConversationKey(AGENT, cid)

    async def main() -> tuple[list[AgentEvent], CompressionEvent | None]:
        agent = Agent.open(AGENT, data_dir=root, model=FunctionModel(recording))
        try:
            events: list[AgentEvent] = []
            async for event in agent.send_message(cid, "remember the budget please"):
                events.append(event)
                if isinstance(event, ResultEvent):
                    log.append("result")
            return events, await agent.await_upkeep(cid)
        finally:
            await agent.aclose()
            agent.runtime.close_resources()

    events, compressed = asyncio.run(main())
    assert log == ["plan", "respond", "result", "summarize"]
    result = events[-2]
    assert isinstance(result, ResultEvent) and result.status == "completed"
    # after the result, in the turn's stream: every edge sees it (SSE, ACP, widgets, eval)
    assert events[-1] == compressed and [e.type for e in events].count("compression") == 1
    assert compressed is not None and compressed.messages_after == 2
    assert compressed.usage.calls == 1  # the summary's call, not counted in the result's usage
    assert result.usage.calls == 2
    (stored,) = seen_by_summariser
    assert stored[-2:] == ["remember the budget please", "Noted."]  # the answer was durable
    with Agent.open(AGENT, data_dir=root, model=FunctionModel(lambda _r: "")) as agent:
        (record,) = agent.conversation_records(cid)
        assert isinstance(record, CompressionRecord) and record.kept == 2
        assert record.strategy == "model" and record.facts_kept == 2
        assert "compression (model)" in agent.turn_log(cid, result.message_id)
        assert agent.task_state(cid).value.important_facts == tuple(COMPRESSED["important_facts"])


def test_the_next_turn_waits_for_the_compression_and_plans_on_its_state(
    tmp_path: Path,
) -> None:
    root, cid = make_root(tmp_path)
    log: list[str] = []
    reply = replies({"archive": COMPRESSED}, log)
    in_flight: list[bool] = []
    state = {"summarising": False}

    async def gated(request: ModelRequest) -> Any:
        if request.purpose == "summarize":
            state["summarising"] = True
            started.set()
            await release.wait()
            state["summarising"] = False
        elif request.purpose == "plan":
            in_flight.append(state["summarising"])
        return reply(request)

    async def turn(agent: Agent, text: str) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        async for event in agent.send_message(cid, text):  # up to the result, as send() does
            events.append(event)
            if isinstance(event, ResultEvent):
                break
        return events

    async def main() -> list[AgentEvent]:
        agent = Agent.open(AGENT, data_dir=root, model=FunctionModel(gated))
        try:
            first = await turn(agent, "remember the budget please")
            assert isinstance(first[-1], ResultEvent)
            await started.wait()  # the summary is being written, in the background
            second = asyncio.create_task(turn(agent, "what is my budget?"))
            for _ in range(200):  # every chance to start planning, were it not waiting
                await asyncio.sleep(0)
            assert not second.done() and log.count("plan") == 1
            release.set()
            return await second
        finally:
            await agent.aclose()
            agent.runtime.close_resources()

    started, release = asyncio.Event(), asyncio.Event()
    events = asyncio.run(main())
    assert isinstance(events[-1], ResultEvent) and events[-1].status == "completed"
    assert in_flight == [False, False]  # no plan while a summary was being written
    model_log = log[log.index("summarize") :]
    assert model_log[:2] == ["summarize", "plan"]


def test_cancelled_past_its_bound_the_upkeep_writes_nothing(tmp_path: Path) -> None:
    root, cid = make_root(tmp_path, {**COMPRESSION, "wait_seconds": 0.05})
    log: list[str] = []
    reply = replies({"archive": COMPRESSED}, log)

    async def stuck(request: ModelRequest) -> Any:
        if request.purpose == "summarize" and log.count("summarize") == 0:
            log.append("summarize")
            await asyncio.Event().wait()  # never answers: cancelled past the bound
        return reply(request)

    async def main() -> None:
        agent = Agent.open(AGENT, data_dir=root, model=FunctionModel(stuck))
        try:
            async for _event in agent.send_message(cid, "remember the budget please"):
                pass
            assert await agent.await_upkeep(cid) is None  # cancelled at its bound
        finally:
            await agent.aclose()
            agent.runtime.close_resources()

    asyncio.run(main())
    assert task_state_of(root, cid) == (TaskState(), 0)  # TaskState as it was
    with Agent.open(AGENT, data_dir=root, model=FunctionModel(lambda _r: "")) as agent:
        assert agent.conversation_records(cid) == []
        assert [m.content for m in agent.load_conversation_history(cid)][-2:] == [
            "remember the budget please",
            "Noted.",
        ]


# -------------------------------------------------------------- another process, SIGKILL


def _gated_turn(root: str, cid: str, work: str) -> None:
    """The child: one turn with the update and the compression; the compression's summary
    waits for ``go`` (after writing ``gated``)."""
    log: list[str] = []
    reply = replies({"update": UPDATED, "archive": COMPRESSED}, log)

    async def gated(request: ModelRequest) -> Any:
        text = request.messages[-1].content if request.messages else ""
        if request.purpose == "summarize" and "Archived dialogue" in text:
            while not Path(work, "answered").exists():  # the caller has its result
                await asyncio.sleep(0.01)
            Path(work, "gated").write_text("1")
            while not Path(work, "go").exists():
                await asyncio.sleep(0.01)
        return reply(request)

    with Agent.open(AGENT, data_dir=root, model=FunctionModel(gated)) as agent:
        turn = agent.send("remember the budget please", cid)
        assert turn.result.status == "completed"
        Path(work, "answered").write_text(turn.result.message_id)
        assert agent.wait_upkeep(cid) is not None


def _wait_for(path: Path, pid: int) -> None:
    """Until *path* exists (bounded by the test's timeout); the child must still be alive."""
    while not path.exists():
        finished, status = os.waitpid(pid, os.WNOHANG)
        assert finished == 0, f"the child ended early ({status})"
        asyncio.run(asyncio.sleep(0.01))


def test_another_process_sees_the_old_or_the_new_task_state_never_a_mix(
    tmp_path: Path,
) -> None:
    root, cid = make_root(tmp_path, {**COMPRESSION, "incremental_messages": 4})
    work = tmp_path / "work"
    work.mkdir()
    pid = fork_call(_gated_turn, str(root), cid, str(work))
    try:
        _wait_for(work / "gated", pid)  # the update is done (in memory), the summary waits
        assert task_state_of(root, cid) == (TaskState(), 0)  # not the update alone
        other = Agent.open(AGENT, data_dir=root, model=FunctionModel(lambda _r: ""))
        with other, pytest.raises(ConversationBusyError):  # the job holds the writer lock
            other.send("me too", cid)
    finally:
        (work / "go").write_text("1")
        assert wait_exit(pid) == 0
    state, version = task_state_of(root, cid)
    assert version == 1  # one write: the update and the compression together
    assert state.important_facts == tuple(COMPRESSED["important_facts"])


def _killed_turn(root: str, cid: str, work: str, where: str) -> None:
    """The child: a compressing turn, SIGKILLed during the summary (``summarize``) or after
    TaskState was written and before the record (``record``). ``acks``: what it was told."""
    log: list[str] = []
    reply = replies({"archive": COMPRESSED}, log)

    acks = Path(work, "acks")

    def summary(request: ModelRequest) -> Any:
        if request.purpose == "summarize":
            while not acks.exists():  # the caller has been told (the answer came first)
                time.sleep(0.005)
            if where == "summarize":
                os.kill(os.getpid(), signal.SIGKILL)
        return reply(request)

    if where == "record":
        add_record = FileConversationStore.add_record

        def killed(self: FileConversationStore, key: Any, record: Any) -> None:
            os.kill(os.getpid(), signal.SIGKILL)
            add_record(self, key, record)

        FileConversationStore.add_record = killed  # type: ignore[method-assign]
    with Agent.open(AGENT, data_dir=root, model=FunctionModel(summary)) as agent:
        turn = agent.send("remember the budget please", cid)
        told = Path(work, "acks.tmp")
        told.write_text(json.dumps([turn.result.message_id, turn.text]))
        told.rename(acks)
        agent.wait_upkeep(cid)


@pytest.mark.parametrize("where", ["summarize", "record"])
def test_sigkill_during_background_compression_loses_nothing_acknowledged(
    tmp_path: Path, where: str
) -> None:
    root, cid = make_root(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    pid = fork_call(_killed_turn, str(root), cid, str(work), where)
    assert wait_exit(pid) == -signal.SIGKILL
    message_id, answer = json.loads((work / "acks").read_text())
    store = FileConversationStore(root)
    store.recover(AGENT)
    assert store.verify(AGENT).ok
    key = ConversationKey(AGENT, cid)
    messages = store.messages(key)
    assert [(m.message_id, m.content) for m in messages[-2:]] == [
        (message_id, "remember the budget please"),
        (message_id, answer),
    ]
    assert store.records(key) == []  # the window was not cut
    state, version = task_state_of(root, cid)
    if where == "summarize":
        assert (state, version) == (TaskState(), 0)  # TaskState as it was
    else:  # written before the record: the facts are in TaskState and still in the window
        assert version == 1 and "budget 3000 USDT" in state.important_facts
    # the conversation goes on, and the window (still over the thresholds) is compressed
    log: list[str] = []
    with Agent.open(
        AGENT, data_dir=root, model=FunctionModel(replies({"archive": COMPRESSED}, log))
    ) as agent:
        assert agent.send("and now?", cid).result.status == "completed"
        assert agent.wait_upkeep(cid) is not None
        assert len(agent.conversation_records(cid)) == 1
