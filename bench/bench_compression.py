"""Compression with the embedded model: what each strategy keeps, and what it costs the answer.

Figures, not pass/fail (``make bench``); issue 27's targets.

1. **Facts kept at K=2** per strategy (``model``, ``extractive``, ``hybrid``) on every dialogue
   under ``data/scenarios/compression/`` (N=4, T=100, K=2: the older 16 of 18 messages are
   folded into TaskState), summarised by the embedded model (``llama``, SmolLM2-135M):
   known facts in TaskState (of six), the window's tokens after / before (and with the
   TaskState block added), model-written facts grounding dropped, facts in the final
   TaskState that are *not* grounded in the dialogue (must be 0), and the time per summary.
2. **Send-to-result** of a planner turn that triggers compression (strategy ``model``, the
   slowest) against one that does not, on a conversation pre-filled with the 18-message
   dialogue (after one uncounted warm-up turn each): today's path (compression after
   ``result``, in the background) and the old one (compression in the turn, before
   ``result``: a turn driven without a background). The turn's own plan and answer come
   from a zero-latency function so the difference is compression alone; the summaries are
   the embedded model's. Rounds are interleaved; the background upkeep is awaited (and
   timed) before the next turn.

Results are printed and appended to ``bench/results/compression.csv``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkit import Agent, ChatModel, create_model
from agentkit.events import ResultEvent
from agentkit.memory.grounding import is_grounded
from agentkit.memory.strategies import STRATEGIES, grounding_source
from agentkit.memory.sweep import ThresholdGrid, load_scenario, sweep_compression
from agentkit.models.base import Completion
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.planning import TurnContext, drive
from agentkit.planning.state import UserMessage
from agentkit.store import ConversationKey

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "compression.csv"
SCENARIOS = REPO / "data" / "scenarios" / "compression"
SHIPPED = ("project_planning_en.json", "desk_onboarding_zh.json")
PLAN = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
AGENT = "bench-memory"


async def facts_kept(model: ChatModel) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    grid = ThresholdGrid([4], [100], [2], STRATEGIES)
    for path in sorted(SCENARIOS.glob("*.json")):
        scenario = load_scenario(path)
        window = scenario.window()
        swept = await sweep_compression(
            window, scenario.task_state(), model, grid, facts=scenario.facts
        )
        source = grounding_source(window, scenario.task_state())
        for row in swept:
            state = row.task_state
            ungrounded_in_state = [f for f in state.important_facts if not is_grounded(f, source)]
            rows.append({
                "part": "facts",
                "dialogue": path.stem,
                "tuned_on": path.name in SHIPPED,
                "strategy": row.strategy,
                "status": row.status,
                "facts_total": row.facts_total,
                "facts_in_state": row.facts_in_state,
                "lost": "; ".join(
                    f for f in scenario.facts if f not in dict(_where(state, scenario.facts))
                ),
                "facts_ungrounded": row.facts_ungrounded,
                "ungrounded_in_state": len(ungrounded_in_state),
                "tokens_before": row.tokens_before,
                "tokens_after": row.tokens_after,
                "window_ratio": round(row.tokens_after / row.tokens_before, 3),
                "with_state_ratio": round(
                    (row.tokens_after + row.state_tokens) / row.tokens_before, 3
                ),
                "summary_ms": row.summary_ms,
                "error": row.error[:120],
            })  # fmt: skip
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    return rows


def _where(state: Any, facts: tuple[str, ...]) -> list[tuple[str, str]]:
    from agentkit.memory.fidelity import fact_retention

    return list(fact_retention(state, facts).where)


def _agent_root(root: Path, compression: dict[str, Any]) -> None:
    folder = root / "agents" / AGENT
    folder.mkdir(parents=True, exist_ok=True)
    config = {"engine": "planner", "model": "llama", "compression": compression}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")


def _model(llama: ChatModel) -> FunctionModel:
    """Plans and answers at once; summaries by the embedded model."""

    async def reply(request: ModelRequest) -> Any:
        if request.purpose == "summarize":
            completion: Completion = await llama.complete(
                list(request.messages), purpose="summarize", schema=request.json_schema
            )
            return completion
        if request.purpose == "plan":
            return PLAN
        return "Noted: I will keep that in mind."

    return FunctionModel(reply, name="scripted-turn+llama-summary")


def _prefill(agent: Agent, dialogue: Path) -> str:
    cid = agent.create_conversation("bench").conversation_id
    for message in load_scenario(dialogue).window():
        agent.append_message(cid, message)
    return cid


async def _timed_turn(agent: Agent, cid: str, text: str) -> tuple[float, float]:
    started = time.perf_counter()
    result_ms = 0.0
    async for event in agent.send_message(cid, text):
        if isinstance(event, ResultEvent):
            result_ms = (time.perf_counter() - started) * 1000
            assert event.status == "completed", event
    upkept = await agent.await_upkeep(cid)
    upkeep_ms = (time.perf_counter() - started) * 1000 - result_ms
    return result_ms, upkeep_ms if upkept is not None else 0.0


async def _inline_turn(agent: Agent, cid: str, text: str) -> float:
    """The old path: the same turn, compression before result."""
    runtime, config = agent.runtime, agent.config
    turn = TurnContext(
        key=ConversationKey(agent.id, cid), input=UserMessage(text), store=runtime.store,
        memory=runtime.memory, model=runtime.model, tools=runtime.tools,
        config=config.planner, system_prompt=runtime.system_prompt(),
        agent_dir=runtime.folder.path, max_turns=config.max_turns,
        compression=config.compression,
    )  # fmt: skip
    started = time.perf_counter()
    async for event in drive(turn):
        if isinstance(event, ResultEvent):
            return (time.perf_counter() - started) * 1000
    raise AssertionError("no result")


async def turn_latency(llama: ChatModel, rounds: int) -> list[dict[str, Any]]:
    dialogue = SCENARIOS / "project_planning_en.json"
    figures: dict[str, list[float]] = {"no_compression": [], "background": [], "inline": []}
    upkeep: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for name, compression in (
            ("no_compression", {"max_messages": 100, "token_threshold": 100_000}),
            ("compress", {"max_messages": 4, "token_threshold": 100, "keep_recent": 2}),
        ):
            roots[name] = Path(tmp, name)
            _agent_root(roots[name], compression)
        quiet = Agent.open(AGENT, data_dir=roots["no_compression"], model=_model(llama))
        busy = Agent.open(AGENT, data_dir=roots["compress"], model=_model(llama))
        try:
            for kind_agent in (quiet, busy):  # warm-up (imports, first prompts): not counted
                await _timed_turn(kind_agent, _prefill(kind_agent, dialogue), "warm up")
            for index in range(rounds):
                order = ["no_compression", "background", "inline"]
                order = order[index % 3 :] + order[: index % 3]
                for kind in order:
                    text = f"My launch team size is {index + 8} people."
                    if kind == "no_compression":
                        ms, _ = await _timed_turn(quiet, _prefill(quiet, dialogue), text)
                    elif kind == "background":
                        ms, spent = await _timed_turn(busy, _prefill(busy, dialogue), text)
                        upkeep.append(spent)
                    else:
                        ms = await _inline_turn(busy, _prefill(busy, dialogue), text)
                    figures[kind].append(ms)
                    print(f"round {index} {kind}: {ms:.1f} ms", flush=True)
        finally:
            await quiet.aclose()
            await busy.aclose()
            quiet.runtime.close_resources()
            busy.runtime.close_resources()
    rows = [
        {"part": "latency", "strategy": "model", "turn": kind,
         "send_to_result_median_ms": round(statistics.median(values), 1),
         "runs": len(values)}
        for kind, values in figures.items()
    ]  # fmt: skip
    rows.append({
        "part": "latency", "strategy": "model", "turn": "background upkeep after result",
        "send_to_result_median_ms": round(statistics.median(upkeep), 1), "runs": len(upkeep),
    })  # fmt: skip
    return rows


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    llama = create_model(args.model)
    assert isinstance(llama, ChatModel)
    try:
        rows = await facts_kept(llama) if not args.latency_only else []
        if args.rounds:
            rows += await turn_latency(llama, args.rounds)
    finally:
        await llama.aclose()
    return rows


def write(rows: list[dict[str, Any]], model: str) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    fields = sorted({key for row in rows for key in row} | {"at", "host", "model"})
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({**row, "at": stamp, "host": platform.node(), "model": model})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default=os.environ.get("AGENTKIT_BENCH_MODEL", "llama"))
    parser.add_argument("--rounds", type=int, default=9, help="latency rounds (0: skip)")
    parser.add_argument("--latency-only", action="store_true")
    options = parser.parse_args()
    results = asyncio.run(main(options))
    write(results, options.model)
    for item in results:
        print(json.dumps(item, ensure_ascii=False))
    sys.exit(0)
