"""Benchmark of agentkit.telemetry: what a turn's spans cost (figures, not pass/fail).

A turn of 8 spans as a plan_replan turn makes them — ``invoke_agent``, ``plan`` + its
``chat`` call, one ``execute_tool``, ``plan`` (replan) + ``chat``, the answer's ``chat``,
``update_memory`` — with usage, finish reasons, a span event and known secrets to scrub, is
started and ended N times in each mode, each mode in its own process (OpenTelemetry's
global providers can be set once per process):

* ``records``     no OpenTelemetry set up: agentkit's own records only (the default);
* ``sdk``         the OpenTelemetry SDK as the global tracer and meter providers, spans to an
  ``InMemorySpanExporter`` through a ``SimpleSpanProcessor`` (exported as each ends), the
  two GenAI histograms to an ``InMemoryMetricReader``;
* ``sdk_batch``   the same with a ``BatchSpanProcessor`` (what the CLI sets up for OTLP);
* ``sdk_floor``   for comparison, the same 8 spans, attributes, event and 9 histogram
  records made directly through the SDK as ``sdk`` has it set up, without agentkit: what
  OpenTelemetry itself costs, so ``sdk - sdk_floor`` is agentkit's own part.

The figure is the median cost of one whole turn's telemetry, in milliseconds (the target:
≤ 0.3 ms added per turn with the SDK and an in-memory exporter). Run
``python bench/bench_telemetry.py`` (``make bench``); appends rows
``timestamp,mode,spans,median_ms,p90_ms`` to ``bench/results/telemetry.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "telemetry.csv"
MODES = ("records", "sdk", "sdk_batch", "sdk_floor")
SECRET = "sk-live-0123456789abcd"


def one_turn(tel, index: int) -> int:
    from agentkit.telemetry import semconv

    trace = tel.turn(
        conversation_id="conv-bench",
        message_id=f"msg-{index}",
        scenario="B",
        provider="scripted",
        model="scripted:inline",
        secrets=lambda: [SECRET],
    )
    with trace.plan() as plan:
        call = trace.model_call(plan, model="llama", purpose="plan")
        call.usage(812, 64)
        call.finish_reasons(["stop"])
        call.end()
    with trace.tool_call(None, name="get_balance", call_id="s1") as tool:
        tool.set("agentkit.step_id", "s1")
    with trace.plan() as replan:
        call = trace.model_call(replan, model="llama", purpose="replan")
        call.usage(900, 12)
        call.end()
    call = trace.model_call(None, model="llama", purpose="respond", stream=True)
    call.usage(950, 40)
    call.end()
    trace.event(semconv.QUESTION_EVENT, {"agentkit.question": "Anything else?"})
    trace.memory_update(None, store="task_state", strategy="incremental").end()
    trace.end(status="completed", input_tokens=2662, output_tokens=116)
    return len(trace.spans)


def floor_turn(tracer, histograms, index: int) -> int:
    """The same spans straight through the SDK (attributes as agentkit sets them)."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    usage, duration = histograms
    root_attrs = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "scripted",
        "gen_ai.agent.id": "desk-001", "gen_ai.agent.name": "Desk",
        "gen_ai.conversation.id": "conv-bench", "gen_ai.request.model": "scripted:inline",
        "agentkit.scenario": "B", "agentkit.message_id": f"msg-{index}",
    }  # fmt: skip
    plan_attrs = {
        "gen_ai.operation.name": "plan", "gen_ai.provider.name": "scripted",
        "gen_ai.agent.id": "desk-001", "gen_ai.agent.name": "Desk",
        "gen_ai.conversation.id": "conv-bench",
    }  # fmt: skip
    root = tracer.start_span("invoke_agent desk-001", attributes=root_attrs)
    in_root = trace.set_span_in_context(root)

    def call(parent_ctx, purpose, tokens, stream=False):
        attrs = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
            "gen_ai.request.model": "llama", "agentkit.purpose": purpose,
            "gen_ai.request.stream": stream, "gen_ai.conversation.id": "conv-bench",
        }  # fmt: skip
        span = tracer.start_span("chat llama", parent_ctx, SpanKind.CLIENT, attrs)
        span.set_attributes(
            {"gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1]}
        )
        span.end()
        common = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
                  "gen_ai.request.model": "llama"}  # fmt: skip
        duration.record(0.001, common)
        usage.record(tokens[0], {**common, "gen_ai.token.type": "input"})
        usage.record(tokens[1], {**common, "gen_ai.token.type": "output"})

    for purpose, tokens in (("plan", (812, 64)), ("replan", (900, 12))):
        plan = tracer.start_span("plan desk-001", in_root, attributes=plan_attrs)
        call(trace.set_span_in_context(plan), purpose, tokens)
        plan.end()
        if purpose == "plan":
            tool = tracer.start_span("execute_tool get_balance", in_root, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_balance",
                "gen_ai.tool.call.id": "s1", "gen_ai.tool.type": "function",
            })  # fmt: skip
            tool.set_attribute("agentkit.step_id", "s1")
            tool.end()
    call(in_root, "respond", (950, 40), stream=True)
    root.add_event("agentkit.question", {"agentkit.question": "Anything else?"})
    tracer.start_span("update_memory task_state", in_root, attributes={
        "gen_ai.operation.name": "update_memory", "gen_ai.provider.name": "scripted",
        "gen_ai.memory.store.name": "task_state", "gen_ai.memory.update.strategy": "incremental",
        "gen_ai.conversation.id": "conv-bench",
    }).end()  # fmt: skip
    root.set_attributes({
        "agentkit.turn.status": "completed", "gen_ai.usage.input_tokens": 2662,
        "gen_ai.usage.output_tokens": 116,
    })  # fmt: skip
    root.end()
    return 8


def measure(mode: str, turns: int, rounds: int) -> dict[str, float]:
    """Run in a fresh process: set *mode* up, then time *rounds* x *turns* turns."""
    if mode != "records":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        processor = BatchSpanProcessor if mode == "sdk_batch" else SimpleSpanProcessor
        provider.add_span_processor(processor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    from agentkit.telemetry import Telemetry

    if mode == "sdk_floor":
        meter = metrics.get_meter("floor")
        histograms = (
            meter.create_histogram("gen_ai.client.token.usage", unit="{token}"),
            meter.create_histogram("gen_ai.client.operation.duration", unit="s"),
        )
        tracer = trace.get_tracer("floor")
        turn = lambda _tel, index: floor_turn(tracer, histograms, index)  # noqa: E731
    else:
        turn = one_turn
    tel = Telemetry(agent_id="desk-001", agent_name="Desk", keep=256)
    spans = 0
    for index in range(200):  # warm-up: imports, caches, the histograms
        spans = turn(tel, index)
    samples = []
    for round_ in range(rounds):
        if mode != "records":
            exporter.clear()
        start = time.perf_counter()
        for index in range(turns):
            turn(tel, round_ * turns + index)
        samples.append((time.perf_counter() - start) / turns * 1000)
    samples.sort()
    return {
        "spans": spans,
        "median_ms": statistics.median(samples),
        "p90_ms": samples[int(len(samples) * 0.9) - 1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500, help="turns per timed round")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.turns, args.rounds)))
        return

    rows = []
    print(f"telemetry per turn ({args.rounds} rounds x {args.turns} turns), ms")
    print(f"{'mode':<10} {'spans':>5} {'median':>8} {'p90':>8}")
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--turns", str(args.turns),
             "--rounds", str(args.rounds)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        figures = json.loads(done.stdout)
        print(f"{mode:<10} {figures['spans']:>5} {figures['median_ms']:>8.3f} "
              f"{figures['p90_ms']:>8.3f}")  # fmt: skip
        rows.append((mode, figures))

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS.exists()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    with RESULTS.open("a", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        if new:
            writer.writerow(["timestamp", "python", "mode", "spans", "median_ms", "p90_ms"])
        for mode, figures in rows:
            writer.writerow([
                stamp, platform.python_version(), mode, figures["spans"],
                f"{figures['median_ms']:.4f}", f"{figures['p90_ms']:.4f}",
            ])  # fmt: skip


if __name__ == "__main__":
    main()
