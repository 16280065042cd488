"""Asking the graders and counting their votes: a :class:`~agentkit.eval.judges.values.Judge`
over one run's :class:`~agentkit.eval.transcript.Transcript`.

Each grader gets the judge's prompt — the template ``judge`` (``agentkit/eval/prompts/judge.md``,
or ``agents/{agentId}/prompts/judge.md`` when the agent folder overrides it: the planner's
template mechanism, :func:`~agentkit.planning.prompts.load_template`; placeholders ``$rubric``,
``$reference``, ``$scale``, ``$sees``, ``$reply_format``) — and the parts of the run the judge
sees (:func:`run_view`), and answers with JSON (:func:`reply_schema`), validated by
:class:`~agentkit.eval.judges.values.JudgeReply`. A grader whose model fails, times out, is
not a chat model, or answers anything invalid is a ``judge_error`` verdict saying why: judging
never raises for a model's sake.

Every grader call goes through the model-call tracer
(:meth:`~agentkit.calls.tracer.CallTracer.standalone`, purpose ``judge``): a
:class:`~agentkit.calls.records.CallRecord` in the caller's *records* and a ``chat {model}``
span under an ``invoke_agent judge`` span per judge — a child of the span active when the
judge runs (an eval run's ``eval_run`` span). Its tokens are the grader's, counted apart from
the agent's.

A :class:`JudgeCache` holds valid verdicts by their key — the hash of the grader's model, its
number and everything it was sent — so the same transcript, rubric and model are never asked
twice (``agentkit score`` fills it from the table it re-scores). A ``judge_error`` is never
cached: the next score asks again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue, ValidationError

from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer, error_text
from agentkit.errors import AgentkitError
from agentkit.eval.expectations import Check
from agentkit.eval.judges.values import (
    GraderVerdict,
    Judge,
    Judgement,
    JudgeOutcome,
    JudgePart,
    JudgeReply,
)
from agentkit.eval.reading import read_run
from agentkit.eval.transcript import Transcript
from agentkit.events import AskUserEvent, ResultEvent, ToolCallEvent, ToolResultEvent
from agentkit.models.base import ChatMessage, ChatModel, JsonSchema
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.planning.prompts import load_template
from agentkit.telemetry import Telemetry, TurnTrace, provider_name
from agentkit.tools import SecretMask
from agentkit.types import Usage

__all__ = [
    "AGENT_NAME",
    "PROMPT_NAME",
    "SCRIPTED",
    "GraderModels",
    "JudgeCache",
    "check_judge_models",
    "judge_checks",
    "judge_messages",
    "judge_run",
    "judge_transcript",
    "reply_schema",
    "run_view",
    "vote",
]

#: the template's name: ``judge.md`` in the package, overridable per agent folder
PROMPT_NAME = "judge"
#: the agent name on the judges' ``invoke_agent`` spans
AGENT_NAME = "judge"
#: the grader model spec that means "the judge's own ``script`` replies"
SCRIPTED = "scripted"
_RAW_CHARS = 300
_REASON_CHARS = 500
_PART_TITLES: dict[JudgePart, str] = {
    "answer": "the user's last request and the assistant's final answer",
    "transcript": "the conversation",
    "tool_calls": "the tool calls and their results",
    "final_state": "the state at the end of the run",
}


# -- what a grader is sent ------------------------------------------------------------------------


def reply_schema(judge: Judge) -> JsonSchema:
    """The JSON a grader answers with: a verdict (pass/fail) or a score (1..N), and a reason."""
    if judge.scale is None:
        verdict: JsonSchema = {"type": "string", "enum": ["pass", "fail"]}
        return {
            "title": "judge_verdict",
            "type": "object",
            "properties": {"verdict": verdict, "reason": {"type": "string"}},
            "required": ["verdict", "reason"],
        }
    score: JsonSchema = {"type": "integer", "minimum": 1, "maximum": judge.scale}
    return {
        "title": "judge_score",
        "type": "object",
        "properties": {"score": score, "reason": {"type": "string"}},
        "required": ["score", "reason"],
    }


def _scale_text(judge: Judge) -> tuple[str, str]:
    if judge.scale is None:
        return (
            "Decide pass (the run meets the rubric) or fail (it does not).",
            '{"verdict": "pass" | "fail", "reason": "one sentence"}',
        )
    return (
        f"Give a score from 1 (does not meet the rubric at all) to {judge.scale} (meets it fully).",
        f'{{"score": 1..{judge.scale}, "reason": "one sentence"}}',
    )


def run_view(transcript: Transcript, sees: Sequence[JudgePart], mask: SecretMask) -> str:
    """The parts of the run the judge sees, as text (secrets masked)."""
    blocks = []
    for part in sees:
        body = _PARTS[part](transcript).strip() or "(nothing)"
        blocks.append(f"## {_PART_TITLES[part].capitalize()}\n\n{mask.text(body)}")
    return "\n\n".join(blocks)


def _answer(transcript: Transcript) -> str:
    request = answer = ""
    for turn in read_run(transcript).turns:
        request = turn.said or request
        answer = turn.answer if turn.result is not None else answer
    return f"User: {request}\n\nAssistant: {answer}"


def _conversation(transcript: Transcript) -> str:
    lines = []
    for turn in read_run(transcript).turns:
        lines.append(f"User: {turn.said}")
        for moment in turn.moments:
            event = moment.event
            if isinstance(event, AskUserEvent):
                kind = "asks to confirm" if event.kind == "confirmation" else "asks"
                lines.append(f"Assistant ({kind}): {event.question}")
            elif isinstance(event, ResultEvent) and event.text:
                lines.append(f"Assistant: {event.text}")
    return "\n".join(lines)


def _tool_calls(transcript: Transcript) -> str:
    lines = []
    for moment in read_run(transcript).moments():
        event = moment.event
        if isinstance(event, ToolCallEvent):
            arguments = json.dumps(event.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"- call {event.name} {arguments}")
        elif isinstance(event, ToolResultEvent):
            status = "ok" if event.ok else "FAILED"
            lines.append(f"  result of {event.name} ({status}): {event.output}")
    return "\n".join(lines)


def _final_state(transcript: Transcript) -> str:
    final = transcript.final
    if final is None:
        return "(the run ended before its state could be read)"
    value = {
        "status": final.status,
        "task_state": final.task_state.model_dump(mode="json", exclude={"updated_at"}),
        "state": final.state,
    }
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)


_PARTS = {
    "answer": _answer,
    "transcript": _conversation,
    "tool_calls": _tool_calls,
    "final_state": _final_state,
}


def judge_messages(
    judge: Judge,
    transcript: Transcript,
    *,
    agent_dir: Path | None = None,
    mask: SecretMask | None = None,
) -> list[ChatMessage]:
    """What each grader of *judge* is sent about *transcript*: the rendered template, then
    the parts of the run it sees."""
    scale, reply_format = _scale_text(judge)
    reference = (
        f"A reference answer (a run need not match it word for word):\n{judge.reference}"
        if judge.reference
        else ""
    )
    system = (
        load_template(PROMPT_NAME, agent_dir, package="agentkit.eval")
        .safe_substitute(
            rubric=judge.rubric,
            reference=reference,
            scale=scale,
            sees=", ".join(_PART_TITLES[part] for part in judge.sees),
            reply_format=reply_format,
        )
        .strip()
    )
    view = run_view(transcript, judge.sees, mask or SecretMask())
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=view)]


# -- who grades ----------------------------------------------------------------------------------


class GraderModels:
    """The graders' models: a judge's own spec (or list of specs), else *default* — the
    ``--judge-model`` spec or the run's model (a spec or a model object). ``scripted`` is the
    judge's ``script`` replies. Models made from specs are kept for reuse and closed by
    :meth:`aclose`; relative paths in specs resolve against *base_dir*."""

    def __init__(
        self, default: str | ChatModel | None = None, *, base_dir: Path | None = None
    ) -> None:
        self.default = default
        self.base_dir = base_dir
        self._made: dict[str, ChatModel] = {}

    def identity(self, judge: Judge, grader: int) -> tuple[str, str]:
        """The grader's model spec, and the model as the cache key sees it (a scripted
        grader: its reply too)."""
        chosen = judge.grader_models(None)[grader]
        spec = chosen if chosen is not None else self.default
        if spec is None:
            return "", ""
        if isinstance(spec, ChatModel):
            label = spec.spec or type(spec).__name__
            return label, label
        if spec == SCRIPTED:
            reply = json.dumps(_scripted_reply(judge, grader), ensure_ascii=False, sort_keys=True)
            return SCRIPTED, f"{SCRIPTED} {reply}"
        return spec, spec

    def model(self, judge: Judge, grader: int) -> ChatModel:
        """The model of *judge*'s grader number *grader* (an AgentkitError says why not)."""
        chosen = judge.grader_models(None)[grader]
        spec = chosen if chosen is not None else self.default
        if spec is None:
            raise _NoModelError("no judge model: give --judge-model (or the judge's model)")
        if isinstance(spec, ChatModel):
            return spec
        if spec == SCRIPTED:
            reply = _scripted_reply(judge, grader)
            if reply is None:
                raise _NoModelError(
                    f"the judge {judge.name!r} has no scripted replies (script:) for the "
                    "scripted model: give it a script, or --judge-model"
                )
            model = FunctionModel(_Reply(reply), name=f"judge:{judge.name}")
            model.spec = f"{SCRIPTED}:judge:{judge.name}"
            return model
        made = self._made.get(spec)
        if made is None:
            from agentkit.models.spec import create_model

            backend = create_model(spec, base_dir=self.base_dir)
            if not isinstance(backend, ChatModel):
                raise _NoModelError(f"a judge needs a chat model, not {spec!r}")
            made = self._made[spec] = backend
        return made

    async def aclose(self) -> None:
        """Close the models made here."""
        made, self._made = list(self._made.values()), {}
        for model in made:
            await model.aclose()


class _NoModelError(AgentkitError):
    """A grader has no usable model (its verdict is a judge_error saying why)."""


def _scripted_reply(judge: Judge, grader: int) -> JsonValue | None:
    if not judge.script:
        return None
    return judge.script[min(grader, len(judge.script) - 1)]


@dataclass(frozen=True, slots=True)
class _Reply:
    """A scripted grader's one reply (a FunctionModel's function)."""

    reply: JsonValue

    def __call__(self, request: ModelRequest) -> str:
        value = self.reply
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_judge_models(judges: Iterable[Judge], default: str | ChatModel | None) -> None:
    """Check the model specs *judges* name, and *default*, before any run (a
    :class:`~agentkit.errors.ModelSpecError`, a UsageError, names the bad one)."""
    from agentkit.models.spec import parse_model_spec

    specs = [default] if isinstance(default, str) else []
    for judge in judges:
        specs += [spec for spec in judge.grader_models(None) if spec is not None]
    for spec in specs:
        if spec != SCRIPTED:
            parse_model_spec(spec)


# -- the cache -----------------------------------------------------------------------------------


@dataclass
class JudgeCache:
    """Valid grader verdicts by key (see the module docstring); :attr:`hits` counts reuses."""

    verdicts: dict[str, GraderVerdict] = field(default_factory=dict)
    hits: int = 0

    @classmethod
    def of(cls, judgements: Iterable[Iterable[Judgement]]) -> JudgeCache:
        """A cache holding the valid verdicts of stored *judgements* (a table's rows)."""
        cache = cls()
        for row in judgements:
            for judgement in row:
                for verdict in judgement.graders:
                    cache.put(verdict)
        return cache

    def get(self, key: str) -> GraderVerdict | None:
        found = self.verdicts.get(key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, verdict: GraderVerdict) -> None:
        if verdict.outcome != "judge_error" and verdict.key:
            self.verdicts[verdict.key] = verdict


def _key(identity: str, grader: int, messages: Sequence[ChatMessage], schema: JsonSchema) -> str:
    content = {
        "model": identity,
        "grader": grader,
        "messages": [message.model_dump() for message in messages],
        "schema": schema,
    }
    text = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- grading -------------------------------------------------------------------------------------


def _parse(text: str) -> object:
    """The JSON of a reply (a code fence around it is allowed)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return json.loads(body)


async def _grade(
    judge: Judge,
    grader: int,
    *,
    models: GraderModels,
    messages: list[ChatMessage],
    tracer_for: _Tracers,
    cache: JudgeCache | None,
) -> GraderVerdict:
    """One grader's verdict (a judge_error saying why, whatever goes wrong)."""
    schema = reply_schema(judge)
    label, identity = models.identity(judge, grader)
    key = _key(identity, grader, messages, schema)
    found = cache.get(key) if cache is not None else None
    if found is not None:
        return found.model_copy(update={"grader": grader})

    def error(
        reason: str, *, raw: str = "", called: bool = False, usage: Usage | None = None
    ) -> GraderVerdict:
        spent = usage or Usage()
        return GraderVerdict(
            grader=grader,
            model=label,
            outcome="judge_error",
            reason=reason[:_REASON_CHARS],
            raw=raw[:_RAW_CHARS],
            key=key,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            called=called,
        )

    try:
        model = models.model(judge, grader)
    except AgentkitError as failure:
        return error(f"no judge model: {failure}")
    async with tracer_for(model).call("judge", messages, schema) as call:
        try:
            completion = await call.reply()
        except Exception as failure:  # any failure of the judge model is its own outcome
            problem = error_text(failure)
            call.read(error=problem)
            return error(f"the judge model failed: {problem}", called=True)
        usage = completion.usage
        try:
            value = _parse(completion.text)
            reply = JudgeReply.model_validate(value)
            outcome, score = reply.checked(judge)
        except json.JSONDecodeError as failure:
            problem = f"not JSON ({failure.msg} at {failure.pos})"
        except ValidationError as failure:
            first = failure.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(root)"
            problem = f"{where}: {first['msg']}"
        except ValueError as failure:
            problem = str(failure)
        else:
            call.read(raw=completion.text, parsed=reply.model_dump(mode="json", exclude_none=True))
            verdict = GraderVerdict(
                grader=grader,
                model=label,
                outcome=outcome,
                score=score,
                reason=reply.reason.strip()[:_REASON_CHARS],
                key=key,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
            )
            if cache is not None:
                cache.put(verdict)
            return verdict
        call.read(raw=completion.text, error=problem)
        return error(f"invalid reply: {problem}", raw=completion.text, called=True, usage=usage)


class _Tracers:
    """One standalone call tracer per grader model, sharing the judge's trace and records."""

    def __init__(
        self, trace: TurnTrace, records: list[CallRecord] | None, mask: SecretMask | None
    ) -> None:
        self.trace = trace
        self.records = records
        self.mask = mask
        self.tracers: dict[int, CallTracer] = {}

    def __call__(self, model: ChatModel) -> CallTracer:
        tracer = self.tracers.get(id(model))
        if tracer is None:
            tracer = self.tracers[id(model)] = CallTracer.standalone(
                model,
                trace=self.trace,
                records=self.records,
                mask=self.mask,
            )
        return tracer

    @property
    def usage(self) -> Usage:
        total = Usage()
        for tracer in self.tracers.values():
            total += tracer.usage
        return total


def vote(judge: Judge, verdicts: Sequence[GraderVerdict]) -> tuple[JudgeOutcome, float | None]:
    """The judge's outcome from its graders' *verdicts*, and the mean score of those that
    answered: what the answers decide whatever the graders in error would have said; when
    those could tip it, ``judge_error``."""
    k = len(verdicts)
    answered = [verdict for verdict in verdicts if verdict.outcome != "judge_error"]
    errors = k - len(answered)
    passes = sum(1 for verdict in answered if verdict.outcome == "pass")
    fails = len(answered) - passes
    scores = [verdict.score for verdict in answered if verdict.score is not None]
    mean = sum(scores) / len(scores) if scores else None
    outcome: JudgeOutcome
    if judge.vote == "majority":  # more than half pass; a tie fails
        decided = passes > k / 2 or passes + errors <= k / 2
        outcome = ("pass" if passes > k / 2 else "fail") if decided else "judge_error"
    elif judge.vote == "all":
        outcome = "fail" if fails else "judge_error" if errors else "pass"
    elif judge.vote == "any":
        outcome = "pass" if passes else "judge_error" if errors else "fail"
    else:  # mean: of every grader's score, the ones in error at the scale's ends
        total = sum(scores)
        low = (total + errors * judge.lowest) / k
        high = (total + errors * judge.highest) / k
        mark = judge.pass_mark()
        outcome = "pass" if low >= mark else "fail" if high < mark else "judge_error"
    return outcome, mean


def judge_checks(judgements: Iterable[Judgement]) -> list[Check]:
    """The run's checks its judges make: one per judge that decided (``judge NAME``); a
    ``judge_error`` makes none (it is counted apart, never the agent's failure)."""
    return [
        Check(
            f"judge {item.judge}",
            "run",
            item.outcome == "pass",
            "" if item.outcome == "pass" else item.reason,
        )
        for item in judgements
        if item.outcome != "judge_error"
    ]


def _reason(judge: Judge, outcome: JudgeOutcome, verdicts: Sequence[GraderVerdict]) -> str:
    counts = {name: 0 for name in ("pass", "fail", "judge_error")}
    for verdict in verdicts:
        counts[verdict.outcome] += 1
    tally = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
    reasons = "; ".join(
        f"grader {verdict.grader} ({verdict.outcome}): {verdict.reason}"
        for verdict in verdicts
        if verdict.reason
    )
    text = f"{outcome} by {judge.vote} vote of {len(verdicts)} ({tally})"
    return (f"{text}: {reasons}" if reasons else text)[: _REASON_CHARS * 2]


async def judge_run(
    judge: Judge,
    transcript: Transcript,
    models: GraderModels,
    *,
    cache: JudgeCache | None = None,
    agent_dir: Path | None = None,
    mask: SecretMask | None = None,
    records: list[CallRecord] | None = None,
) -> Judgement:
    """*judge*'s judgement of the run *transcript* showed: each grader asked in turn (or
    found in *cache*), then the vote. *records* receives each grader call's record."""
    messages = judge_messages(judge, transcript, agent_dir=agent_dir, mask=mask)
    first = models.identity(judge, 0)[0] or "unknown"
    trace = Telemetry(agent_id=AGENT_NAME, agent_name=AGENT_NAME).turn(
        conversation_id=transcript.run or transcript.scenario,
        message_id=f"judge-{judge.name}",
        provider=provider_name(first),
        model=first,
    )
    tracers = _Tracers(trace, records, mask)
    try:
        verdicts = [
            await _grade(
                judge, grader, models=models, messages=messages, tracer_for=tracers, cache=cache
            )
            for grader in range(judge.grader_count)
        ]
    except BaseException as failure:  # cancelled: the span ends, the cancel goes on
        trace.end("failed", error_type=type(failure).__qualname__, message=str(failure))
        raise
    outcome, score = vote(judge, verdicts)
    usage = tracers.usage
    trace.end(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return Judgement(
        judge=judge.name,
        outcome=outcome,
        score=score,
        vote=judge.vote,
        reason=_reason(judge, outcome, verdicts),
        graders=tuple(verdicts),
    )


async def judge_transcript(
    judges: Sequence[Judge],
    transcript: Transcript,
    models: GraderModels,
    *,
    cache: JudgeCache | None = None,
    agent_dir: Path | None = None,
    mask: SecretMask | None = None,
    records: list[CallRecord] | None = None,
) -> tuple[Judgement, ...]:
    """Every judge's judgement of one run, in order."""
    return tuple(
        [
            await judge_run(
                judge,
                transcript,
                models,
                cache=cache,
                agent_dir=agent_dir,
                mask=mask,
                records=records,
            )
            for judge in judges
        ]
    )
