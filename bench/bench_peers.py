"""The peers agentkit's planner turn is measured against (used by ``bench_planner.py``).

Every system runs the same *turn*: read the conversation, one ``plan`` model call, one
``respond`` model call, persist the user message and the answer. The model is a zero-latency
fake in each (agentkit's ScriptedModel, LangChain's GenericFakeChatModel, a plain function),
replying with the same two texts, and the prior conversation holds the same messages:

* **langgraph**: a ``StateGraph`` (nodes ``plan`` → ``respond``; ``messages`` with the
  ``add_messages`` reducer, the plan in its own channel) checkpointed by ``SqliteSaver`` (WAL)
  on a file; the prior turns are loaded with one ``update_state``;
* **openai-agents**: the OpenAI Agents SDK's ``SQLiteSession`` (WAL, ``synchronous=FULL``)
  on a file, used as its ``Runner`` uses a session in one turn: ``get_items()`` (the whole
  history: no limit is the default), ``add_items()`` of the user's input item before the
  model is called, ``add_items()`` of the turn's new items (the assistant's output message)
  after it. The Runner itself is left out (it needs a model provider); the two fake model
  calls are the naive ones. The prior turns are added with one ``add_items``;
* **naive**: ``history.json`` loaded, the message appended, the whole file rewritten and
  fsynced after each message (what the seed's layout invites).

Nothing here is imported by agentkit; langgraph and openai-agents are installed by
``make bench`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PLAN_REPLY = json.dumps(
    {"goal": "answer", "steps": [{"id": "r1", "type": "respond", "title": "answer"}]}
)
ANSWER = "Noted. Here is what I found about your desk today."
REQUEST = "what do I have on my desk?"
_WORDS = ("plan", "tool", "trader", "result", "answer", "the", "a", "of", "to", "binance",
          "model", "config", "exchange", "é", "✓")  # fmt: skip


def conversation(messages: int, seed: int = 7) -> list[tuple[str, str]]:
    """*messages* (role, text) pairs alternating user / assistant: 20 and 60 words."""
    rng = random.Random(seed)
    return [
        ("user", " ".join(rng.choice(_WORDS) for _ in range(20)))
        if index % 2 == 0
        else ("assistant", " ".join(rng.choice(_WORDS) for _ in range(60)))
        for index in range(messages)
    ]


def timed(action: Any, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


# -- naive history.json ----------------------------------------------------------------------


def _rewrite(path: Path, entries: list[dict[str, str]]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(entries, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())


def fake_model(purpose: str, context: list[Any]) -> str:
    """The zero-latency model of the naive store and the Agents SDK session."""
    return PLAN_REPLY if purpose == "plan" else ANSWER


@contextlib.contextmanager
def naive_turn(scratch: Path, prior_turns: int) -> Iterator[Callable[[], None]]:
    """One turn of the naive store after *prior_turns* turns (warmed up)."""
    path = scratch / f"naive-{prior_turns}.json"
    _rewrite(path, [{"role": r, "content": c} for r, c in conversation(2 * prior_turns)])

    def turn() -> None:
        entries = json.loads(path.read_bytes())
        entries.append({"role": "user", "content": REQUEST})
        _rewrite(path, entries)
        window = entries[-40:]
        json.loads(fake_model("plan", window))
        entries.append({"role": "assistant", "content": fake_model("respond", window)})
        _rewrite(path, entries)

    turn()  # warm-up
    yield turn


# -- langgraph -------------------------------------------------------------------------------


def _graph(database: Path) -> tuple[Any, Any, sqlite3.Connection]:
    from typing import Annotated, TypedDict

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AnyMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # the functional form: evaluated here, where the names are (annotations are lazy)
    State = TypedDict(  # noqa: UP013
        "State", {"messages": Annotated[list[AnyMessage], add_messages], "plan": str}
    )

    # text, not AIMessage objects: each call must make a new message (with its own id)
    replies = itertools.cycle([PLAN_REPLY, ANSWER])
    model = GenericFakeChatModel(messages=replies)

    def plan(state: Any) -> dict[str, Any]:
        reply = model.invoke(state["messages"][-40:])
        json.loads(str(reply.content))
        return {"plan": reply.content}

    def respond(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"][-40:])]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("respond", respond)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "respond")
    builder.add_edge("respond", END)
    connection = sqlite3.connect(database, check_same_thread=False)
    saver = SqliteSaver(connection)
    return builder.compile(checkpointer=saver), saver, connection


def _seed_langgraph(database: Path, messages: int) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    graph, _, connection = _graph(database)
    history = [
        HumanMessage(content=text, id=f"m{index}")
        if role == "user"
        else AIMessage(content=text, id=f"m{index}")
        for index, (role, text) in enumerate(conversation(messages))
    ]
    config = {"configurable": {"thread_id": "bench"}}
    graph.update_state(config, {"messages": history, "plan": ""})
    connection.close()


@contextlib.contextmanager
def langgraph_turn(scratch: Path, prior_turns: int) -> Iterator[Callable[[], None]]:
    """One turn of a LangGraph graph with SqliteSaver after *prior_turns* turns (warmed up);
    at the end, checks that every turn was stored."""
    database = scratch / f"langgraph-{prior_turns}.db"
    _seed_langgraph(database, 2 * prior_turns)
    graph, _, connection = _graph(database)
    config = {"configurable": {"thread_id": "bench"}}
    runs = itertools.count()

    def turn() -> None:
        graph.invoke({"messages": [("user", REQUEST)]}, config)
        next(runs)

    try:
        turn()  # warm-up
        yield turn
        state = graph.get_state(config).values
        done = next(runs)
        assert len(state["messages"]) == 2 * (prior_turns + done), len(state["messages"])
    finally:
        connection.close()


def langgraph_resume(scratch: Path, messages: int, repeat: int) -> list[float]:
    """Milliseconds from a fresh connection and graph to the end of the first turn."""
    database = scratch / f"langgraph-resume-{messages}.db"
    _seed_langgraph(database, messages)
    config = {"configurable": {"thread_id": "bench"}}

    def resume() -> None:
        graph, _, connection = _graph(database)
        try:
            graph.invoke({"messages": [("user", "where were we?")]}, config)
        finally:
            connection.close()

    return timed(resume, repeat)


# -- OpenAI Agents SDK: SQLiteSession -----------------------------------------------------------


def _sdk_items(messages: list[tuple[str, str]], start: int = 0) -> list[Any]:
    """(role, text) pairs as the Runner stores them: a user input item, or the assistant's
    output message (a Responses API ``message`` item)."""
    return [
        {"role": "user", "content": text}
        if role == "user"
        else {
            "id": f"msg_{start + index}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        for index, (role, text) in enumerate(messages)
    ]


def _sdk_session(database: Path, messages: int) -> Any:
    from agents.memory import SQLiteSession

    session = SQLiteSession("bench", database)
    if messages:
        asyncio.run(session.add_items(_sdk_items(conversation(messages))))
    return session


def _sdk_turn(session: Any, text: str, number: int) -> Any:
    """One turn as the Runner drives its session (see the module docstring)."""

    async def turn() -> None:
        history = await session.get_items()
        await session.add_items([{"role": "user", "content": text}])
        window = [*history, {"role": "user", "content": text}][-40:]
        json.loads(fake_model("plan", window))
        answer = fake_model("respond", window)
        await session.add_items(_sdk_items([("assistant", answer)], start=10**9 + number))

    return turn()


@contextlib.contextmanager
def openai_agents_turn(scratch: Path, prior_turns: int) -> Iterator[Callable[[], None]]:
    """One turn of the Agents SDK's SQLiteSession after *prior_turns* turns (warmed up); at
    the end, checks that every turn was stored."""
    database = scratch / f"openai-agents-{prior_turns}.db"
    _sdk_session(database, 2 * prior_turns).close()
    session = _sdk_session(database, 0)
    loop = asyncio.new_event_loop()
    count = itertools.count()
    try:

        def turn() -> None:
            loop.run_until_complete(_sdk_turn(session, REQUEST, next(count)))

        turn()  # warm-up
        yield turn
        items = loop.run_until_complete(session.get_items())
        done = next(count)
        assert len(items) == 2 * (prior_turns + done), len(items)
    finally:
        session.close()
        loop.close()


def openai_agents_resume(scratch: Path, messages: int, repeat: int) -> list[float]:
    """Milliseconds from a new SQLiteSession to the end of its first turn."""
    database = scratch / f"openai-agents-resume-{messages}.db"
    _sdk_session(database, messages).close()
    count = itertools.count()

    def resume() -> None:
        session = _sdk_session(database, 0)
        try:
            asyncio.run(_sdk_turn(session, "where were we?", next(count)))
        finally:
            session.close()

    return timed(resume, repeat)
