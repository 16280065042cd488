"""A judge graded by the embedded model, for real: the reply schema becomes the model's
grammar, so SmolLM2-135M answers a valid verdict (what it decides is not tested: it is small)."""

from __future__ import annotations

import asyncio

import pytest
from agentkit.calls.records import CallRecord
from agentkit.eval import GraderModels, Judge, Judgement, judge_run

from .test_judges import transcript

#: a real backend (a model process) under test
pytestmark = pytest.mark.real_model


def test_the_embedded_model_grades_on_both_scales() -> None:
    judges = [
        Judge(name="count", rubric="The answer says how many traders run on desk A."),
        Judge(name="tone", rubric="The answer is polite.", scale=5, threshold=3),
    ]
    records: list[CallRecord] = []

    async def grade() -> list[Judgement]:
        models = GraderModels("llama")
        try:
            return [await judge_run(j, transcript(), models, records=records) for j in judges]
        finally:
            await models.aclose()

    count, tone = asyncio.run(grade())
    assert count.outcome in ("pass", "fail"), count.reason
    assert count.score in (0.0, 1.0)
    assert tone.outcome in ("pass", "fail"), tone.reason
    assert tone.score in (1.0, 2.0, 3.0, 4.0, 5.0)
    assert [r.purpose for r in records] == ["judge", "judge"]
    assert all(r.input_tokens > 0 and not r.error for r in records)
    assert {g.model for j in (count, tone) for g in j.graders} == {"llama"}
