"""Micro-benchmark of a planner turn's events: built and serialised, the old way and the new.

A planner turn of one tool step emits about a dozen events (``session`` … ``result``). The
old way built each as a frozen pydantic model (validated on construction) and every consumer
dumped it again: ``json.dumps(event.model_dump(mode="json", by_alias=True),
ensure_ascii=False)`` — the server's recorder once and the SSE stream once. The new way builds
frozen slotted dataclasses (nothing validated: the turn's own typed code makes them) and
serialises each once: ``event.to_json()`` is made on first use and kept for the next consumer.

The old models are rebuilt here from the event classes (same fields, types, defaults and
config, :func:`_pydantic_twin`), so the comparison holds the wire form fixed: the script checks
that both ways give the same bytes before it times anything. Rounds are interleaved (old, new,
new, old, …); the medians of the per-turn times and their ratio are printed and appended to
``bench/results/events.csv``.

Times are this process's CPU time (``time.process_time``): the machine is shared, and a
wall clock would count the other processes' time slices. Figures of 2026-12-07 (2 cores, load
average ~5): construction alone 34 → 24 µs per turn, construction + one dump (the CLI) 125 →
81 µs, + two dumps (a served turn: recorder and SSE) 208 → 82 µs (2.5 times less).

msgspec (0.23, measured in a scratch environment, not a dependency) builds a seven-field struct
in 0.12 µs against the dataclass's 1.5 µs, and encodes it in 0.27 µs — but only as compact
JSON (``{"a":1}``), not the wire's ``json.dumps`` bytes (``{"a": 1}``), so the serialisation
would stay the C encoder's ~1.5 µs; and pydantic cannot build ``EVENT_ADAPTER`` or the
published schema over msgspec structs. What it would save, ~17 µs of a turn's construction,
does not pay for a dependency and a second schema path.

Run ``python bench/bench_events.py`` (a few seconds); ``--rounds``, ``--turns`` (per round).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_type_hints

from agentkit import events as ev
from agentkit.types import Usage
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.alias_generators import to_camel

RESULTS = Path(__file__).resolve().parent / "results" / "events.csv"
COLUMNS = (
    "timestamp",
    "events_per_turn",
    "consumers",
    "rounds",
    "turns_per_round",
    "old_us_per_turn",
    "new_us_per_turn",
    "ratio",
    "old_build_us",
    "new_build_us",
    "load",
    "python",
    "machine",
)
Wire = Callable[[Any], str]
Side = tuple[str, Callable[[int], list[Any]], Wire]
_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _pydantic_twin(cls: type[Any], twins: dict[type[Any], type[BaseModel]]) -> type[BaseModel]:
    """The pydantic model the event class *cls* was before (its fields, types and defaults)."""
    hints = get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if kind == list[ev.PlannedStep]:
            kind = list[twins[ev.PlannedStep]]  # type: ignore[index]
        if field.default is not dataclasses.MISSING:
            fields[field.name] = (kind, field.default)
        elif field.default_factory is not dataclasses.MISSING:
            fields[field.name] = (kind, Field(default_factory=field.default_factory))
        else:
            fields[field.name] = (kind, ...)
    model: type[BaseModel] = create_model(cls.__name__, __config__=_CONFIG, **fields)
    return model


def _twins() -> dict[type[Any], type[BaseModel]]:
    twins: dict[type[Any], type[BaseModel]] = {}
    twins[ev.PlannedStep] = _pydantic_twin(ev.PlannedStep, twins)
    for cls in (
        ev.SessionEvent,
        ev.PlanningEvent,
        ev.PlanEvent,
        ev.StepStartEvent,
        ev.ToolCallEvent,
        ev.ToolResultEvent,
        ev.StepCompleteEvent,
        ev.ReplanEvent,
        ev.AgentOutputEvent,
        ev.ResultEvent,
    ):
        twins[cls] = _pydantic_twin(cls, twins)
    return twins


def planner_turn(k: dict[type[Any], Callable[..., Any]], n: int) -> list[Any]:
    """The events of one planner turn (a plan of three steps, one tool call, a reply in two
    pieces), built with the constructors *k* (the event classes or their pydantic twins)."""
    steps = [
        k[ev.PlannedStep](
            id="s1",
            step_type="tool",
            title="Look up the order",
            tool_name="get_order",
            tool_args={"order_id": f"A-{n}", "fields": ["status", "eta"]},
        ),
        k[ev.PlannedStep](id="s2", step_type="reason", title="Check the delay"),
        k[ev.PlannedStep](id="s3", step_type="respond", title="Answer"),
    ]
    return [
        k[ev.SessionEvent](
            agent_id="desk",
            conversation_id=f"conv-{n}",
            message_id=f"msg-{n}",
            scenario="C",
            injected="planner 4: system prompt + memory layers",
            history_messages=12,
            model="scripted",
        ),
        k[ev.PlanningEvent](live_state=["orders"], task_state_included=False),
        k[ev.PlanEvent](goal="Where is my order?", steps=steps),
        k[ev.StepStartEvent](step_id="s1", step_type="tool", title="Look up the order"),
        k[ev.ToolCallEvent](id="s1", name="get_order", arguments={"order_id": f"A-{n}"}),
        k[ev.ToolResultEvent](id="s1", name="get_order", output='{"status": "shipped"}'),
        k[ev.StepCompleteEvent](step_id="s1", status="done", summary="shipped, eta Friday"),
        k[ev.ReplanEvent](action="continue", reason="on plan"),
        k[ev.StepStartEvent](step_id="s3", step_type="respond", title="Answer"),
        k[ev.AgentOutputEvent](text="Your order A-1 has shipped "),
        k[ev.AgentOutputEvent](text="and arrives on Friday — 金曜日."),
        k[ev.StepCompleteEvent](step_id="s3", status="done", summary="answered"),
        k[ev.ResultEvent](
            conversation_id=f"conv-{n}",
            message_id=f"msg-{n}",
            status="completed",
            text="Your order A-1 has shipped and arrives on Friday — 金曜日.",
            usage=Usage(input_tokens=812, output_tokens=64, calls=3),
            latency_ms=5.123,
            trace_id="",
        ),
    ]


def old_wire(event: BaseModel) -> str:
    return json.dumps(event.model_dump(mode="json", by_alias=True), ensure_ascii=False)


def new_wire(event: Any) -> str:
    return str(event.to_json())


def _time(turns: int, build: Callable[[int], list[Any]], wire: Wire, n: int) -> float:
    """CPU seconds per turn (this process's: the machine is shared): build the turn's events
    and serialise each *n* times."""
    start = time.process_time()
    for i in range(turns):
        for event in build(i):
            for _ in range(n):
                wire(event)
    return (time.process_time() - start) / turns


def _interleaved(rounds: int, turns: int, n: int, sides: list[Side]) -> dict[str, float]:
    """Median µs per turn of each side, rounds interleaved (the order flips each round)."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    for r in range(rounds):
        for name, build, wire in sides if r % 2 == 0 else sides[::-1]:
            times[name].append(_time(turns, build, wire, n))
    return {name: statistics.median(found) * 1e6 for name, found in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=300, help="turns per round")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    twins = _twins()
    classes = {cls: cls for cls in twins}

    def old(n: int) -> list[Any]:
        return planner_turn(twins, n)

    def new(n: int) -> list[Any]:
        return planner_turn(classes, n)

    for before, after in zip(old(1), new(1), strict=True):  # the same bytes, or no figures
        if old_wire(before) != new_wire(after):
            print(f"wire forms differ:\n  {old_wire(before)}\n  {new_wire(after)}")
            return 1
    events = len(new(0))
    sides: list[Side] = [("old", old, old_wire), ("new", new, new_wire)]
    built = _interleaved(args.rounds, args.turns, 0, sides)  # construction alone
    rows = []
    for consumers in (1, 2):  # the CLI's one dump; the server's recorder and SSE stream
        found = _interleaved(args.rounds, args.turns, consumers, sides)
        rows.append((consumers, found["old"], found["new"]))
    old_build, new_build = built["old"], built["new"]

    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{events} events per planner turn, medians of {args.rounds} interleaved rounds "
          f"x {args.turns} turns (µs per turn)")  # fmt: skip
    print(f"  build only            old {old_build:8.1f}   new {new_build:8.1f}   "
          f"x{old_build / new_build:.1f}")  # fmt: skip
    args.results.parent.mkdir(parents=True, exist_ok=True)
    fresh = not args.results.exists()
    with open(args.results, "a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if fresh:
            writer.writerow(COLUMNS)
        for consumers, old_us, new_us in rows:
            print(f"  build + {consumers} dump(s)    old {old_us:8.1f}   new {new_us:8.1f}   "
                  f"x{old_us / new_us:.1f}")  # fmt: skip
            writer.writerow((
                stamp, events, consumers, args.rounds, args.turns, f"{old_us:.1f}",
                f"{new_us:.1f}", f"{old_us / new_us:.2f}", f"{old_build:.1f}",
                f"{new_build:.1f}", f"{os.getloadavg()[0]:.2f}", platform.python_version(),
                platform.machine(),
            ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
