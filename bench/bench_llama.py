"""Embedded model latency: load time, first token, tokens/s, a schema-constrained call.

Run with ``make bench`` (or ``python bench/bench_llama.py``). Figures, not pass/fail; rows are
appended to bench/results/llama.csv.
"""

from __future__ import annotations

import asyncio
import csv
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from agentkit.models.base import ChatMessage, Completion, TextDelta
from agentkit.models.llama import LlamaModel

RESULTS = Path(__file__).parent / "results" / "llama.csv"
REPEAT = 5
SCHEMA = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "maxLength": 80},
        "steps": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 3},
    },
    "required": ["goal", "steps"],
    "additionalProperties": False,
}


async def one_chat(model: LlamaModel) -> tuple[float, float, int]:
    messages = [
        ChatMessage(role="system", content="You are a concise assistant."),
        ChatMessage(role="user", content="Explain in two sentences what a trading desk does."),
    ]
    started = time.perf_counter()
    first = None
    final = None
    async for event in model.stream(messages, purpose="chat"):
        if isinstance(event, TextDelta) and first is None:
            first = time.perf_counter() - started
        if isinstance(event, Completion):
            final = event
    total = time.perf_counter() - started
    assert final is not None
    assert first is not None
    return first * 1000, final.usage.output_tokens / total, final.usage.output_tokens


async def one_structured(model: LlamaModel) -> float:
    messages = [
        ChatMessage(role="system", content="Reply with JSON only."),
        ChatMessage(role="user", content="Plan: create a trader on Binance with a GPT model."),
    ]
    started = time.perf_counter()
    await model.complete(messages, purpose="plan", schema=SCHEMA)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    model = LlamaModel(max_tokens=96)
    started = time.perf_counter()
    model.count_tokens("warm up")  # loads the weights
    load_ms = (time.perf_counter() - started) * 1000
    firsts, rates, plans = [], [], []
    for _ in range(REPEAT):
        first, rate, _tokens = asyncio.run(one_chat(model))
        firsts.append(first)
        rates.append(rate)
        plans.append(asyncio.run(one_structured(model)))
    rows = [
        ("load_ms", load_ms),
        ("first_token_ms", statistics.median(firsts)),
        ("tokens_per_s", statistics.median(rates)),
        ("structured_call_ms", statistics.median(plans)),
    ]
    print(f"embedded model ({model.path.name}) — {platform.python_version()}, median of {REPEAT}")
    for name, value in rows:
        print(f"  {name:<20} {value:10.1f}")
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(["timestamp", "metric", "median"])
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name, value in rows:
            writer.writerow([stamp, name, f"{value:.3f}"])


if __name__ == "__main__":
    main()
