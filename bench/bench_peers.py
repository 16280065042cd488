"""The peers agentkit's planner turn is measured against (used by ``bench_planner.py``).

Every system runs the same *turn*: read the conversation, one ``plan`` model call, one
``respond`` model call, persist the user message and the answer. The model is a zero-latency
fake in each (agentkit's ScriptedModel, LangChain's GenericFakeChatModel, a plain function),
replying with the same two texts, and the prior conversation holds the same messages:

* **langgraph**: a ``StateGraph`` (nodes ``plan`` → ``respond``; ``messages`` with the
  ``add_messages`` reducer, the plan in its own channel) checkpointed by ``SqliteSaver`` (WAL)
  on a file; the prior turns are loaded with one ``update_state``;
* **naive**: ``history.json`` loaded, the message appended, the whole file rewritten and
  fsynced after each message (what the seed's layout invites).

Nothing here is imported by agentkit; langgraph is installed by ``make bench`` only.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

PLAN_REPLY = json.dumps(
    {"goal": "answer", "steps": [{"id": "r1", "type": "respond", "title": "answer"}]}
)
ANSWER = "Noted. Here is what I found about your desk today."
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


def naive_turns(scratch: Path, prior_turns: int, repeat: int) -> list[float]:
    """Per-turn milliseconds of the naive store after *prior_turns* turns."""
    path = scratch / f"naive-{prior_turns}.json"
    _rewrite(path, [{"role": r, "content": c} for r, c in conversation(2 * prior_turns)])

    def model(purpose: str, context: list[dict[str, str]]) -> str:
        return PLAN_REPLY if purpose == "plan" else ANSWER

    def turn() -> None:
        entries = json.loads(path.read_bytes())
        entries.append({"role": "user", "content": "what do I have on my desk?"})
        _rewrite(path, entries)
        window = entries[-40:]
        json.loads(model("plan", window))
        entries.append({"role": "assistant", "content": model("respond", window)})
        _rewrite(path, entries)

    turn()  # warm-up
    return timed(turn, repeat)


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


def langgraph_turns(scratch: Path, prior_turns: int, repeat: int) -> list[float]:
    """Per-turn milliseconds of a LangGraph graph with SqliteSaver after *prior_turns* turns."""
    database = scratch / f"langgraph-{prior_turns}.db"
    _seed_langgraph(database, 2 * prior_turns)
    graph, _, connection = _graph(database)
    config = {"configurable": {"thread_id": "bench"}}

    def turn() -> None:
        graph.invoke({"messages": [("user", "what do I have on my desk?")]}, config)

    try:
        turn()  # warm-up
        samples = timed(turn, repeat)
        state = graph.get_state(config).values
        assert len(state["messages"]) == 2 * (prior_turns + repeat + 1), len(state["messages"])
        return samples
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
