"""What a judge is and what it decided: plain, versioned values.

A :class:`Judge` is a rubric in words that a model grades a run against (optionally with a
reference answer), seeing only the parts of the run it names (:data:`JudgePart`). It has
``graders`` — K calls to the judge model, or K model specs — whose verdicts are combined by a
``vote``, on a ``scale``: pass/fail, or a score from 1 to N passing at ``threshold``.

Each grader's reply is a :class:`JudgeReply` (verdict, score, reason), validated; a grader that
fails to answer or answers invalidly is a :class:`GraderVerdict` with the outcome
``judge_error``. The vote makes the judge's :class:`Judgement`: its outcome is what the graders
that answered decide *whatever the others would have said*; when the graders in error could
tip it, the outcome is ``judge_error`` too — never a failure of the agent, never silently a
pass (:func:`~agentkit.eval.judges.grading.vote`).

Judgements are kept in the results table (:mod:`agentkit.eval.judges.table`), so they are
read, compared with human labels and re-used without asking a model again: a grader's
``key`` is the hash of everything it saw (model, rubric, the rendered run), the cache key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, model_validator

__all__ = [
    "JUDGE_PARTS",
    "GraderVerdict",
    "Judge",
    "JudgeOutcome",
    "JudgePart",
    "JudgeReply",
    "Judgement",
    "Vote",
]

#: what a judge may see of a run
JudgePart = Literal["answer", "transcript", "tool_calls", "final_state"]
JUDGE_PARTS: tuple[JudgePart, ...] = ("answer", "transcript", "tool_calls", "final_state")
#: how the graders' verdicts make the judge's
Vote = Literal["majority", "all", "any", "mean"]
#: a grader's or a judge's outcome (``judge_error``: no valid answer, or not enough of them)
JudgeOutcome = Literal["pass", "fail", "judge_error"]

_Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_Spec = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Judge(_Value):
    """A model-graded check of a run (in a scenario's ``expect: judges:``, or in Python)."""

    name: _Name = Field(description="the judge's name: its column is judge_<name>")
    rubric: _Text = Field(description="what a passing run does, in words")
    reference: str | None = Field(default=None, description="a reference answer, if any")
    sees: tuple[JudgePart, ...] = Field(
        default=("answer",),
        min_length=1,
        description="the parts of the run shown: answer, transcript, tool_calls, final_state",
    )
    model: _Spec | None = Field(
        default=None,
        description="the grader model spec (default: --judge-model, else the run's model)",
    )
    graders: int | tuple[_Spec, ...] = Field(
        default=1,
        description="K calls to the judge model, or a list of K model specs",
    )
    vote: Vote = Field(default="majority", description="majority, all, any or mean")
    scale: int | None = Field(
        default=None, ge=2, le=100, description="None: pass/fail; N: a score from 1 to N"
    )
    threshold: float | None = Field(
        default=None, description="with a scale: the score (or mean score) that passes"
    )
    script: tuple[JsonValue, ...] = Field(
        default=(),
        description="the scripted judge's replies, one per grader (when the judge model is "
        "'scripted'; the last one repeats)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Judge:
        if len(set(self.sees)) != len(self.sees):
            raise ValueError("'sees' names a part twice")
        if isinstance(self.graders, int):
            if not 1 <= self.graders <= 25:
                raise ValueError("graders is between 1 and 25 (or a list of model specs)")
        elif not self.graders:
            raise ValueError("graders is a number or a non-empty list of model specs")
        elif self.model is not None:
            raise ValueError("give 'model' or a list of graders, not both")
        if self.scale is None and self.threshold is not None:
            raise ValueError("a threshold goes with a scale (1..N)")
        if self.scale is not None:
            if self.threshold is None:
                raise ValueError(f"a scale of 1..{self.scale} needs a threshold")
            if not 1 <= self.threshold <= self.scale:
                raise ValueError(f"the threshold is between 1 and {self.scale}")
        return self

    @property
    def grader_count(self) -> int:
        """K: how many graders vote."""
        return self.graders if isinstance(self.graders, int) else len(self.graders)

    def grader_models(self, default: str | None) -> tuple[str | None, ...]:
        """The model spec of each grader (None: the caller's default model object)."""
        if isinstance(self.graders, tuple):
            return self.graders
        return (self.model or default,) * self.graders

    def threshold_or_one(self) -> float:
        """The score one grader's reply must reach to pass (1: a pass on pass/fail)."""
        return self.threshold if self.threshold is not None else 1.0

    def pass_mark(self) -> float:
        """The score that passes: the threshold on a 1..N scale; on pass/fail, 1 (a pass)
        for one grader's verdict, and 0.5 for the mean of the graders' (``vote: mean``)."""
        if self.threshold is not None:
            return self.threshold
        return 0.5 if self.vote == "mean" else 1.0

    @property
    def lowest(self) -> float:
        return 1.0 if self.scale is not None else 0.0

    @property
    def highest(self) -> float:
        return float(self.scale) if self.scale is not None else 1.0


class JudgeReply(BaseModel):
    """What a grader answers (JSON): a verdict (pass/fail scale), a score (1..N scale), and
    why. Which fields are needed depends on the judge's scale (:meth:`checked`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict: Literal["pass", "fail"] | None = None
    score: float | None = None
    reason: str = ""

    @model_validator(mode="before")
    @classmethod
    def _lower(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("verdict"), str):
            return {**data, "verdict": data["verdict"].strip().lower()}
        return data

    def checked(self, judge: Judge) -> tuple[JudgeOutcome, float]:
        """The grader's outcome and score on *judge*'s scale; a ValueError says what is
        missing or out of range."""
        if judge.scale is None:
            if self.verdict is None:
                raise ValueError("the reply has no verdict ('pass' or 'fail')")
            return self.verdict, 1.0 if self.verdict == "pass" else 0.0
        if self.score is None:
            raise ValueError(f"the reply has no score (1..{judge.scale})")
        if not 1 <= self.score <= judge.scale:
            raise ValueError(f"the score {self.score:g} is outside 1..{judge.scale}")
        return ("pass" if self.score >= judge.threshold_or_one() else "fail"), float(self.score)


class GraderVerdict(_Value):
    """One grader's answer (or failure) on one run."""

    #: which grader (0 … K-1)
    grader: int
    #: the model spec that graded
    model: str
    outcome: JudgeOutcome
    #: pass/fail scale: 1 pass, 0 fail; 1..N scale: the score; None for ``judge_error``
    score: float | None = None
    #: the grader's reason, or what went wrong (``judge_error``)
    reason: str = ""
    #: the start of the reply (kept for a ``judge_error``, to see what came back)
    raw: str = ""
    #: the hash of everything the grader saw: the cache key
    key: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    #: a model call was made for it (False: it failed before one, e.g. no scripted reply)
    called: bool = True


class Judgement(_Value):
    """What one judge decided about one run, with each grader's verdict."""

    v: Literal[1] = 1
    #: the judge's name
    judge: str
    outcome: JudgeOutcome
    #: the mean score of the graders that answered (pass/fail: the share that passed)
    score: float | None = None
    vote: Vote = "majority"
    #: why, in a sentence: the tally, and a reason of the graders
    reason: str = ""
    graders: tuple[GraderVerdict, ...] = ()

    @property
    def grader_errors(self) -> int:
        """How many graders failed to answer validly."""
        return sum(1 for grader in self.graders if grader.outcome == "judge_error")

    @property
    def calls(self) -> int:
        return sum(1 for grader in self.graders if grader.called)

    @property
    def tokens(self) -> int:
        return sum(grader.input_tokens + grader.output_tokens for grader in self.graders)
