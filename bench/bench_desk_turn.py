"""A desk turn against LangGraph, and what spans cost: figures, not pass/fail (``make bench``).

The turn (issue 23's held-out timing): ``Agent.send_message`` on desk-001 with a zero-latency
scripted model, after 100 prior turns, for a request about live configuration:
the live-state refresh re-runs the agent's four snapshot tools, the plan has one read step
and the answer, the replan after the read says continue, and the answer is streamed — three
model calls, five tool runs, every write a planner turn makes (the journal's two fsynced
commits, ExecutionState, calls.jsonl).

Systems, interleaved in rounds (the order rotated each round) so that each sees the same
stretches of a shared machine:

* ``agentkit``: no OpenTelemetry provider in use (agentkit's own span records only);
* ``agentkit+otel``: the OpenTelemetry SDK with a ``BatchSpanProcessor`` (what a deployment
  uses: spans are exported off the turn's thread) into an ``InMemorySpanExporter`` and an
  in-memory metric reader (what a configured provider costs);
* ``langgraph``: a ``StateGraph`` of one node per turn (the same three fake model calls and
  the read, in the node), checkpointed by ``SqliteSaver`` after 100 prior turns.

Medians and the ratio to LangGraph are printed and appended to ``bench/results/desk_turn.csv``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import itertools
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentkit import Agent, ScriptedModel
from agentkit.events import ResultEvent, ToolResultEvent
from agentkit_desk import run_desk_tool

import bench_peers
from bench_planner import CONVERSATION, build_conversation, copy_agent, interleaved

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "desk_turn.csv"
REQUEST = "which exchange accounts do I have?"
ANSWER = "You have one exchange account: binance main."
PLAN = {
    "goal": "list the exchange accounts",
    "steps": [
        {"id": "s1", "type": "tool", "title": "accounts", "tool_name": "get_exchange_configs",
         "tool_args": {}},
        {"id": "s2", "type": "respond", "title": "answer", "instruction": "Answer."},
    ],
}  # fmt: skip


SCRIPT = {"plan": [PLAN], "replan": [{"action": "continue"}], "respond": [ANSWER]}


@contextlib.contextmanager
def agentkit_turn(scratch: Path, prior_turns: int, name: str) -> Iterator[Callable[[], None]]:
    root = scratch / name
    copy_agent(root, "desk-001", compression={"max_messages": 1_000_000})
    workspace = root / "agents" / "desk-001" / "workspace"
    run_desk_tool(
        workspace,
        "create_exchange_config",
        '{"exchange": "binance", "account_name": "main", "api_key": "A1", "secret_key": "S1"}',
    )
    build_conversation(root, "desk-001", 2 * prior_turns)
    loop = asyncio.new_event_loop()
    with Agent.open("desk-001", data_dir=root, model=ScriptedModel(SCRIPT)) as agent:

        async def stream() -> list[Any]:
            return [e async for e in agent.send_message(CONVERSATION, REQUEST)]

        def turn() -> None:
            events = loop.run_until_complete(stream())
            result = events[-1]
            assert isinstance(result, ResultEvent), result
            assert result.status == "completed", result
            assert result.text == ANSWER, result.text
            reads = [e for e in events if isinstance(e, ToolResultEvent)]
            assert len(reads) == 5, [e.name for e in reads]  # 4 live-state tools + the step

        turn()
        yield turn
    loop.close()


@contextlib.contextmanager
def without_provider(
    turn_setup: contextlib.AbstractContextManager[Callable[[], None]],
) -> Iterator[Callable[[], None]]:
    """The same turn as if no OpenTelemetry provider were configured in this process."""
    try:
        from agentkit.telemetry import _spans
    except ImportError:  # an agentkit without telemetry (an older checkout, for comparison)
        with turn_setup as turn:
            yield turn
        return

    with turn_setup as turn:

        def bare() -> None:
            real = _spans.bridge
            _spans.bridge = lambda: None  # type: ignore[assignment]
            try:
                turn()
            finally:
                _spans.bridge = real

        yield bare


def _one_node_graph(database: Path) -> tuple[Any, sqlite3.Connection]:
    from typing import Annotated, TypedDict

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AnyMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    State = TypedDict(  # noqa: UP013
        "State", {"messages": Annotated[list[AnyMessage], add_messages], "plan": str}
    )
    replies = itertools.cycle([json.dumps(PLAN), json.dumps({"action": "continue"}), ANSWER])
    model = GenericFakeChatModel(messages=replies)
    accounts = [{"exchange": "binance", "account_name": "main"}]

    def turn(state: Any) -> dict[str, Any]:
        window = state["messages"][-40:]
        snapshot = [json.dumps(accounts) for _ in range(4)]  # the four snapshot reads
        plan = json.loads(str(model.invoke(window).content))
        observation = json.dumps(accounts)  # the plan's read step
        json.loads(str(model.invoke([*window]).content))  # the replan decision
        answer = model.invoke(window)
        return {"messages": [answer], "plan": json.dumps([plan, snapshot, observation])}

    builder = StateGraph(State)
    builder.add_node("turn", turn)
    builder.add_edge(START, "turn")
    builder.add_edge("turn", END)
    connection = sqlite3.connect(database, check_same_thread=False)
    return builder.compile(checkpointer=SqliteSaver(connection)), connection


@contextlib.contextmanager
def langgraph_turn(scratch: Path, prior_turns: int) -> Iterator[Callable[[], None]]:
    from langchain_core.messages import AIMessage, HumanMessage

    database = scratch / "langgraph-desk.db"
    graph, connection = _one_node_graph(database)
    config = {"configurable": {"thread_id": "bench"}}
    history = [
        HumanMessage(content=text, id=f"m{index}")
        if role == "user"
        else AIMessage(content=text, id=f"m{index}")
        for index, (role, text) in enumerate(bench_peers.conversation(2 * prior_turns))
    ]
    graph.update_state(config, {"messages": history, "plan": ""})

    def turn() -> None:
        graph.invoke({"messages": [("user", REQUEST)]}, config)

    try:
        turn()
        yield turn
    finally:
        connection.close()


def _install_sdk() -> Any:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return exporter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prior-turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    exporter = _install_sdk()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="agentkit-bench-desk-") as tmp:
        scratch = Path(tmp)
        systems: dict[str, contextlib.AbstractContextManager[Callable[[], None]]] = {
            "agentkit": without_provider(agentkit_turn(scratch, args.prior_turns, "plain")),
            "agentkit+otel": agentkit_turn(scratch, args.prior_turns, "otel"),
        }
        try:
            import langgraph  # noqa: F401

            systems["langgraph"] = langgraph_turn(scratch, args.prior_turns)
        except ImportError:
            print("langgraph is not installed (make bench installs it): its row is skipped")
        samples = interleaved(systems, args.rounds)
    from opentelemetry import trace

    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    exported = len(exporter.get_finished_spans())
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"spans the SDK exported: {exported}")
    print(
        f"desk turn at {args.prior_turns} prior turns, load {load:.2f} → {os.getloadavg()[0]:.2f}"
    )
    for name, median in medians.items():
        ratio = ""
        if "langgraph" in medians and name != "langgraph":
            ratio = f"  ({medians['langgraph'] / median:.2f}x faster than langgraph)"
        print(f"  {name:14s} {median:7.3f} ms median over {len(samples[name])} turns{ratio}")
    if "agentkit+otel" in medians:
        added = medians["agentkit+otel"] - medians["agentkit"]
        print(f"  spans to the SDK + in-memory exporter add {added:.3f} ms per turn (median)")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    new = not args.results.exists()
    with open(args.results, "a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(["system", "prior_turns", "median_ms", "turns", "python", "machine"])
        for name, median in medians.items():
            writer.writerow(
                [name, args.prior_turns, round(median, 4), len(samples[name]),
                 platform.python_version(), platform.machine()]
            )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
