"""Model judges: graders answer through the model-call tracer, vote, and a grader that fails
or answers garbage is a ``judge_error`` — never the agent's failure, never silently a pass."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from agentkit.calls.records import CallRecord
from agentkit.errors import ConfigError, ModelError
from agentkit.eval import (
    GraderModels,
    GraderVerdict,
    Judge,
    JudgeCache,
    Judgement,
    Transcript,
    UserTurn,
    judge_run,
    load_judgements,
    load_scenario,
    run_eval,
)
from agentkit.eval.judges.grading import judge_messages, vote
from agentkit.eval.results import report_text
from agentkit.eval.transcript import RunState
from agentkit.events import ResultEvent, ToolCallEvent, ToolResultEvent
from agentkit.memory import TaskState
from agentkit.testing import FunctionModel, ModelRequest
from pydantic import ValidationError

from ._otel import OtelCapture, capture
from .test_eval_runs import SCENARIOS, scenario

PASS = '{"verdict": "pass", "reason": "it gave the status"}'
FAIL = '{"verdict": "fail", "reason": "no status given"}'
GARBAGE = "I think it was fine?"


def says_pass(request: ModelRequest) -> str:
    return PASS


def says_fail(request: ModelRequest) -> str:
    return FAIL


def says_garbage(request: ModelRequest) -> str:
    return GARBAGE


def in_turn(*replies: str) -> FunctionModel:
    """A grader model answering *replies* in order, one per request."""
    return FunctionModel(lambda request: replies[request.index], name="graders")


def transcript() -> Transcript:
    """A small run: the user asks for a status, a tool runs, the agent answers."""
    events = [
        ToolCallEvent(id="c1", name="get_status", arguments={"desk": "A"}),
        ToolResultEvent(id="c1", name="get_status", output="desk A: 3 traders running"),
        ResultEvent(conversation_id="conv-1", message_id="msg-1", status="completed",
                    text="Desk A runs 3 traders."),
    ]  # fmt: skip
    return Transcript(
        run="status--p0",
        scenario="status",
        turns=[UserTurn(number=1, said="How is desk A?", events=events)],
        final=RunState(status="completed", task_state=TaskState(), state={"desk": {"A": 3}}),
    )


def judged(judge: Judge, model: FunctionModel) -> Judgement:
    return asyncio.run(judge_run(judge, transcript(), GraderModels(model)))


@pytest.fixture
def otel() -> OtelCapture:
    return capture()


def test_three_graders_vote_by_majority_and_garbage_is_a_judge_error(otel: OtelCapture) -> None:
    judge = Judge(name="status", rubric="The answer says how many traders run.", graders=3)
    records: list[CallRecord] = []
    model = in_turn(PASS, PASS, GARBAGE)
    result = asyncio.run(judge_run(judge, transcript(), GraderModels(model), records=records))
    assert result.outcome == "pass" and result.score == 1.0  # 2 of 3: a majority
    assert [g.outcome for g in result.graders] == ["pass", "pass", "judge_error"]
    garbage = result.graders[2]
    assert garbage.reason.startswith("invalid reply: not JSON") and garbage.raw == GARBAGE
    assert garbage.score is None and result.grader_errors == 1
    assert "2 pass, 1 judge_error" in result.reason
    # every grader call went through the tracer: a record each, purpose judge, and a span
    assert [r.purpose for r in records] == ["judge"] * 3 and len(model.requests) == 3
    assert records[2].error.startswith("not JSON") and records[0].parsed == {
        "verdict": "pass",
        "reason": "it gave the status",
    }
    assert result.calls == 3 and result.tokens > 0
    spans = otel.by_name(f"chat {model.spec}")
    assert len(spans) == 3
    assert [str((s.attributes or {}).get("agentkit.purpose")) for s in spans] == ["judge"] * 3
    (root,) = otel.by_name("invoke_agent judge")
    assert {s.parent.span_id for s in spans if s.parent} == {root.context.span_id}
    # pass, fail, garbage: the garbage could tip it either way, so the judge cannot decide
    split = judged(judge, in_turn(PASS, FAIL, GARBAGE))
    assert split.outcome == "judge_error" and split.score == 0.5
    assert judged(judge, in_turn(FAIL, FAIL, GARBAGE)).outcome == "fail"


def test_three_grader_models_by_spec() -> None:
    specs = tuple(f"function:tests.test_judges:{name}" for name in ("says_pass", "says_fail",
                                                                     "says_garbage"))  # fmt: skip
    judge = Judge(name="status", rubric="The answer says how many traders run.", graders=specs)
    models = GraderModels(None)
    result = asyncio.run(judge_run(judge, transcript(), models))
    asyncio.run(models.aclose())
    assert [g.model for g in result.graders] == list(specs)
    assert [g.outcome for g in result.graders] == ["pass", "fail", "judge_error"]
    assert result.outcome == "judge_error"


def verdicts(*outcomes: str, scores: Sequence[float | None] = ()) -> list[GraderVerdict]:
    made = []
    for number, outcome in enumerate(outcomes):
        score = scores[number] if scores else {"pass": 1.0, "fail": 0.0}.get(outcome)
        made.append(GraderVerdict(grader=number, model="m", outcome=outcome, score=score))  # type: ignore[arg-type]
    return made


@pytest.mark.parametrize(
    ("rule", "outcomes", "expected"),
    [
        ("majority", ("pass", "pass", "fail"), "pass"),
        ("majority", ("pass", "fail"), "fail"),  # a tie fails
        ("majority", ("judge_error", "judge_error", "judge_error"), "judge_error"),
        ("all", ("pass", "pass", "pass"), "pass"),
        ("all", ("pass", "judge_error", "pass"), "judge_error"),  # never silently a pass
        ("all", ("fail", "judge_error", "pass"), "fail"),
        ("any", ("fail", "pass", "fail"), "pass"),
        ("any", ("fail", "judge_error"), "judge_error"),
        ("any", ("fail", "fail"), "fail"),
        ("mean", ("pass", "fail"), "pass"),  # mean 0.5 reaches 0.5
        ("mean", ("pass", "fail", "fail"), "fail"),
        ("mean", ("pass", "judge_error"), "pass"),  # 0.5 at worst: decided anyway
        ("mean", ("fail", "judge_error"), "judge_error"),  # 0 or 0.5: the error decides
    ],
)
def test_votes(rule: str, outcomes: tuple[str, ...], expected: str) -> None:
    judge = Judge(name="j", rubric="r", graders=len(outcomes), vote=rule)  # type: ignore[arg-type]
    assert vote(judge, verdicts(*outcomes))[0] == expected


def test_a_scale_with_a_threshold() -> None:
    judge = Judge(name="tone", rubric="Polite.", scale=5, threshold=4, graders=3, vote="mean")
    replies = ('{"score": 5, "reason": "kind"}', '{"score": 3, "reason": "curt"}',
               '{"score": 4, "reason": "fine"}')  # fmt: skip
    result = judged(judge, in_turn(*replies))
    assert result.outcome == "pass" and result.score == 4.0
    assert [g.outcome for g in result.graders] == ["pass", "fail", "pass"]
    out_of_range = judged(judge.model_copy(update={"graders": 1}), in_turn('{"score": 9}'))
    assert out_of_range.outcome == "judge_error"
    assert "outside 1..5" in out_of_range.graders[0].reason
    with pytest.raises(ValidationError, match="needs a threshold"):
        Judge(name="tone", rubric="Polite.", scale=5)


def test_a_failing_judge_model_is_a_judge_error_with_its_record(otel: OtelCapture) -> None:
    def down(request: ModelRequest) -> str:
        raise ModelError("judge-endpoint", "503 Service Unavailable")

    records: list[CallRecord] = []
    model = FunctionModel(down, name="down")
    result = asyncio.run(
        judge_run(Judge(name="j", rubric="r"), transcript(), GraderModels(model), records=records)
    )
    assert result.outcome == "judge_error"
    assert "503 Service Unavailable" in result.graders[0].reason
    assert len(records) == 1 and "503" in records[0].error
    (span,) = otel.by_name(f"chat {model.spec}")
    assert span.status.status_code.name == "ERROR"


def test_the_same_content_is_never_asked_twice() -> None:
    judge = Judge(name="status", rubric="The answer says how many traders run.", graders=2)
    model = FunctionModel(says_pass, name="grader")
    cache = JudgeCache()
    first = asyncio.run(judge_run(judge, transcript(), GraderModels(model), cache=cache))
    again = asyncio.run(judge_run(judge, transcript(), GraderModels(model), cache=cache))
    assert len(model.requests) == 2 and cache.hits == 2 and again == first
    # another rubric is another content: asked again
    other = judge.model_copy(update={"rubric": "The answer names the desk."})
    asyncio.run(judge_run(other, transcript(), GraderModels(model), cache=cache))
    assert len(model.requests) == 4
    # a stored table's verdicts fill a cache: nothing is asked again
    stored = JudgeCache.of([[first]])
    asyncio.run(judge_run(judge, transcript(), GraderModels(model), cache=stored))
    assert len(model.requests) == 4 and stored.hits == 2
    # errors are not kept: a judge that failed is asked again next time
    broken = FunctionModel(says_garbage, name="grader")
    fresh = JudgeCache()
    failed = asyncio.run(judge_run(other, transcript(), GraderModels(broken), cache=fresh))
    assert failed.outcome == "judge_error" and fresh.verdicts == {}


def test_the_judge_sees_only_the_parts_it_names(tmp_path: Path) -> None:
    answer_only = judge_messages(Judge(name="j", rubric="Says the count."), transcript())
    assert "Desk A runs 3 traders." in answer_only[1].content
    assert "How is desk A?" in answer_only[1].content
    assert "get_status" not in answer_only[1].content
    everything = judge_messages(
        Judge(name="j", rubric="r", sees=("tool_calls", "final_state"), reference="3 traders"),
        transcript(),
    )
    assert 'call get_status {"desk": "A"}' in everything[1].content
    assert "result of get_status (ok): desk A: 3 traders running" in everything[1].content
    assert '"status": "completed"' in everything[1].content
    assert "Desk A runs" not in everything[1].content
    assert "3 traders" in everything[0].content  # the reference answer, in the prompt
    # an agent folder's prompts/judge.md replaces the package's template (the planner's way)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "judge.md").write_text("GRADE STRICTLY: $rubric", encoding="utf-8")
    custom = judge_messages(Judge(name="j", rubric="Says the count."), transcript(),
                            agent_dir=tmp_path)  # fmt: skip
    assert custom[0].content == "GRADE STRICTLY: Says the count."


def test_an_empty_rubric_is_refused_where_it_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="rubric"):
        Judge(name="j", rubric="   ")
    text = (SCENARIOS / "desk_status_command_en.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "empty_rubric.yaml"
    bad.write_text(text + "  judges:\n    - name: clear\n      rubric: ''\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"expect\.judges\.0\.rubric"):
        load_scenario(bad)


def _with_judges(name: str, *judges: Judge) -> object:
    base = scenario(name)
    return base.model_copy(update={"expect": base.expect.model_copy(update={"judges": judges})})


def test_an_always_erroring_judge_leaves_the_run_verdict_untouched(data_dir: Path) -> None:
    def down(request: ModelRequest) -> str:
        raise ModelError("judge-endpoint", "connection refused")

    name = "desk_create_trader_en"
    plain = run_eval([scenario(name)], model="scripted", data_dir=data_dir, progress=False)
    erring = Judge(name="erring", rubric="The trader was created after consent.", graders=2)
    judged_runs = run_eval(
        [_with_judges(name, erring)],  # type: ignore[list-item]
        model="scripted",
        judge_model=FunctionModel(down, name="down"),
        data_dir=data_dir,
        progress=False,
    )
    own = ["passed", "outcome", "checks", "checks_failed", "failures", "error", "model_calls",
           "input_tokens", "output_tokens"]  # fmt: skip
    assert judged_runs[own].to_dict("records") == plain[own].to_dict("records")
    (judgement,) = load_judgements(judged_runs)[0]
    assert judgement.outcome == "judge_error" and judgement.grader_errors == 2
    record = judged_runs.to_dict("records")[0]
    assert record["judge_erring"] == "judge_error" and record["judge_errors"] == 1
    assert record["judge_calls"] == 2  # counted apart from the agent's model_calls
    assert plain.to_dict("records")[0]["judge_errors"] == 0
    assert "1 judge errors (a judge could not decide" in report_text(judged_runs)


def test_judges_that_decide_are_checks_of_the_run(data_dir: Path) -> None:
    """Under --model scripted each judge answers from its own script; a pass adds a check, a
    fail fails the run and says why."""
    name = "desk_create_trader_en"
    asked = {"verdict": "pass", "reason": "asked"}
    good = Judge(name="consent", rubric="A confirmation was asked before creating.",
                 sees=("transcript", "tool_calls"), script=(asked,))  # fmt: skip
    bad = Judge(name="brief", rubric="The answer is one sentence.",
                script=('{"verdict": "fail", "reason": "two sentences"}',))  # fmt: skip
    plain = run_eval([scenario(name)], model="scripted", data_dir=data_dir, progress=False)
    frame = run_eval(
        [_with_judges(name, good, bad)],  # type: ignore[list-item]
        model="scripted",
        data_dir=data_dir,
        progress=False,
    )
    record, before = frame.to_dict("records")[0], plain.to_dict("records")[0]
    assert (record["judge_consent"], record["judge_brief"]) == ("pass", "fail")
    assert record["checks"] == before["checks"] + 2
    assert record["checks_failed"] == 1 and record["passed"] is False
    assert record["outcome"] == "failed"
    assert "run: judge brief FAILED" in str(record["failures"])
    assert "two sentences" in str(record["failures"])
    assert record["judge_errors"] == 0
    # a judge without a script under the scripted model is a judge_error, not a pass
    unscripted = Judge(name="unscripted", rubric="Anything.")
    frame = run_eval([_with_judges(name, unscripted)], model="scripted",  # type: ignore[list-item]
                     data_dir=data_dir, progress=False)  # fmt: skip
    record = frame.to_dict("records")[0]
    assert record["judge_unscripted"] == "judge_error" and record["passed"] is True
    assert record["judge_calls"] == 0
    (judgement,) = load_judgements(frame)[0]
    assert "no scripted replies" in judgement.graders[0].reason
