"""Every model call of an evaluation has a record and a span: the agent's turns, the simulated
user's moves, and a compression sweep's summaries all go through the model-call tracer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.calls.records import CallRecord
from agentkit.eval import load_transcripts, run_eval
from agentkit.eval.world import ScenarioReplies
from agentkit.memory.sweep import ThresholdGrid, load_scenario, sweep_compression
from agentkit.memory.tokens import estimate_tokens

from ._otel import OtelCapture, capture
from .test_eval_runs import REPO, scenario
from .test_eval_simulated import TRADER, OnlyWhatIsAsked


@pytest.fixture
def otel() -> OtelCapture:
    return capture()


def _model_spans(otel: OtelCapture, model: str) -> list[str]:
    """The purposes of the model-call spans of *model*, in start order."""
    spans = sorted(otel.by_name(f"chat {model}"), key=lambda span: span.start_time or 0)
    return [str((span.attributes or {}).get("agentkit.purpose")) for span in spans]


def test_in_a_sweep_with_a_simulated_user_every_model_call_has_a_record_and_a_span(
    data_dir: Path, tmp_path: Path, otel: OtelCapture
) -> None:
    base = scenario(TRADER)
    agent = ScenarioReplies(base).model()  # the scenario's own replies, as a model object
    user = FunctionModel(OnlyWhatIsAsked({"trader_name": "Alpha"}), name="simulated_user")
    keep = tmp_path / "runs"
    frame = run_eval(
        [base], model=agent, user_model=user, keep_dir=keep, data_dir=data_dir, progress=False
    )
    assert frame["passed"].all(), frame["failures"].tolist()
    # the agent's calls: a calls.jsonl record each (its turns' traces) and a span each
    made = [request.purpose for request in agent.requests]
    assert len(made) == frame["model_calls"].iloc[0] == 5
    traces = sorted(keep.glob("*/agents/*/conversations/*/*/calls.jsonl"))
    records = [
        CallRecord.from_json_line(line)
        for path in sorted(traces, key=lambda p: p.stat().st_mtime_ns)
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(r.purpose for r in records) == sorted(made)
    assert sorted(_model_spans(otel, agent.spec)) == sorted(made)
    # the simulated user's: a record each in the run's transcript, and a span each
    asked = [request.purpose for request in user.requests]
    assert len(asked) == frame["sim_model_calls"].iloc[0] == 2
    (transcript,) = load_transcripts(frame)
    assert transcript is not None
    assert [r.purpose for r in transcript.user_calls] == asked == ["chat", "chat"]
    assert transcript.user_calls[0].messages[0]["role"] == "system"
    assert transcript.user_calls[-1].parsed == {"action": "done", "message": ""}
    assert _model_spans(otel, user.spec) == asked
    # each simulator move is an invoke_agent span under the run's eval_run span
    (run,) = otel.by_name(f"eval_run {TRADER}")
    moves = otel.by_name("invoke_agent simulated_user")
    assert len(moves) == 2
    assert all(move.parent is not None and move.parent.span_id == run.context.span_id
               for move in moves)  # fmt: skip
    calls = otel.by_name(f"chat {user.spec}")
    assert {call.parent.span_id for call in calls if call.parent} == {
        move.context.span_id for move in moves
    }


def test_a_failing_simulator_call_still_has_its_record_and_span(
    data_dir: Path, otel: OtelCapture
) -> None:
    broken = FunctionModel(lambda request: "not json at all", name="broken_user")
    frame = run_eval(
        [scenario(TRADER)], model="scripted", user_model=broken, data_dir=data_dir,
        progress=False,
    )  # fmt: skip
    assert frame["outcome"].tolist() == ["error"]
    (transcript,) = load_transcripts(frame)
    assert transcript is not None and len(transcript.user_calls) == 2  # the call, its repair
    assert all(r.error and r.raw == "not json at all" for r in transcript.user_calls)
    spans = otel.by_name(f"chat {broken.spec}")
    assert len(spans) == 2 and all(span.status.status_code.name == "ERROR" for span in spans)


def test_a_compression_sweep_traces_each_summary(otel: OtelCapture) -> None:
    path = REPO / "data" / "scenarios" / "compression" / "family_trip_zh.json"
    compression = load_scenario(path)
    requests: list[ModelRequest] = []

    def summarise(request: ModelRequest) -> dict[str, object]:
        requests.append(request)
        return {"important_facts": [compression.facts[0]]}

    model = FunctionModel(summarise, name="summariser")
    grid = ThresholdGrid([4], [100, 200], [2, 6], ["model", "extractive"])
    rows = asyncio.run(
        sweep_compression(
            compression.window(), compression.task_state(), model, grid,
            facts=compression.facts, estimate=estimate_tokens,
        )
    )  # fmt: skip
    assert len(requests) == 2  # one per cut (K), shared by both T; extractive none
    called = [row for row in rows if row.call is not None]
    assert {id(row.call) for row in called} == {id(row.call) for row in called[:2]}
    assert all(row.strategy == "model" for row in called) and len(called) == 4
    assert all(row.call is None for row in rows if row.strategy == "extractive")
    calls = {id(row.call): row.call for row in called}
    assert [c.purpose for c in calls.values() if c is not None] == ["summarize", "summarize"]
    assert [c.messages for c in calls.values() if c is not None] == [
        [dict(m.model_dump()) for m in request.messages] for request in requests
    ]
    spans = otel.by_name(f"chat {model.spec}")
    assert len(spans) == 2
    (sweep,) = otel.by_name("invoke_agent compression_sweep")
    memory = {span.context.span_id: span for span in otel.by_name("update_memory task_state")}
    for span in spans:  # chat {model} < update_memory < the sweep
        assert span.parent is not None and span.parent.span_id in memory
        parent = memory[span.parent.span_id].parent
        assert parent is not None and parent.span_id == sweep.context.span_id
