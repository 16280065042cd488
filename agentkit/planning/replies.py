"""Structured model calls of a planner turn: read once, with one repair round.

A structured reply is read in one place and once: the backend is given the JSON schema (a
grammar for the embedded model, ``response_format`` for an OpenAI endpoint), and the reply's
text is then extracted leniently (:func:`extract_json`) and validated by the pydantic reply
types of :mod:`agentkit.planning.plan`; a model failure or an unusable reply is a *problem*
string for the repair round, never an exception. Every call goes through the turn's call
tracer (:mod:`agentkit.calls.tracer`), which times, traces and records it.
"""

from __future__ import annotations

from pydantic import JsonValue

from agentkit.calls.errors import TurnFailedError
from agentkit.calls.tracer import error_text
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage, JsonSchema, Purpose
from agentkit.planning import grounding, reads
from agentkit.planning.graph import Turn
from agentkit.planning.plan import PlanFormatError, extract_json, parse_plan
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import batch_schema, plan_schema
from agentkit.telemetry import PlanSpan, Span

__all__ = ["repair", "request_plan", "structured", "text_reply"]

#: how much of an unusable reply the repair round shows the model again
_REPAIR_REPLY_CHARS = 4000


async def text_reply(
    turn: Turn, purpose: Purpose, messages: list[ChatMessage], parent: Span | None = None
) -> str:
    """A free-text call's reply (a model failure or timeout raises)."""
    async with turn.tracer.call(purpose, messages, parent=parent) as call:
        return (await call.reply()).text


async def structured(
    turn: Turn,
    purpose: Purpose,
    messages: list[ChatMessage],
    schema: JsonSchema,
    parent: Span | None = None,
) -> tuple[str, JsonValue, str]:
    """``(problem, value, raw)``: the reply's JSON value (leniently extracted, not yet checked
    against the reply type) or the problem with it, and the reply's text (for a repair).
    Model failures are problems too."""
    raw = ""
    try:
        async with turn.tracer.call(purpose, messages, schema, parent=parent) as call:
            try:
                raw = (await call.reply()).text
            except StructuredOutputError as error:  # a backend that checks the schema itself
                raw = error.raw
            try:
                value = extract_json(raw)
            except PlanFormatError as error:
                call.read(raw=raw, error=error.problem)
                return error.problem, None, raw
            turn.ctx.mask.learn_json(value)  # planned keys: masked in the raw text too
            call.read(raw=raw, parsed=turn.ctx.mask.json(value))
            return "", value, raw
    except (ModelError, TimeoutError, RecursionError) as error:
        return error_text(error), None, raw


async def repair(
    turn: Turn,
    purpose: Purpose,
    messages: list[ChatMessage],
    schema: JsonSchema,
    *,
    problem: str,
    last: str,
    parent: Span | None = None,
) -> tuple[str, JsonValue, str]:
    """The repair round: the same call again, showing the model its *last* reply and *problem*."""
    prompt = render_prompt("repair", turn.ctx.agent_dir, problem=problem)
    more = [
        *messages,
        ChatMessage(role="assistant", content=turn.ctx.scrub(last)[:_REPAIR_REPLY_CHARS]),
        ChatMessage(role="user", content=prompt),
    ]
    return await structured(turn, purpose, more, schema, parent)


async def request_plan(
    turn: Turn, messages: list[ChatMessage], what: str, taken: frozenset[str] | None = None
) -> tuple[str, tuple[PlanStep, ...], bool]:
    """A ``plan`` call, checked, with one repair round: ``(goal, steps, repaired)``. With
    *taken* (strategy next_step) it is the next batch: it may be empty, and its step ids
    must be new. No usable reply after the repair is a failed turn naming *what*."""
    ctx = turn.ctx
    tools, max_steps = turn.tools, ctx.config.max_steps
    said = grounding.said(turn)
    if taken is None:
        schema = plan_schema(tools, max_steps, said)
    else:
        schema = batch_schema(tools, max_steps, said)
    span = turn.trace.plan() if turn.trace is not None else None
    try:
        problem, value, raw = await structured(turn, "plan", messages, schema, span)
        goal, steps, problem = _read_plan(turn, value, problem, taken)
        if not problem:
            return goal, _planned(span, goal, _reads_kept(turn, steps, what, taken)), False
        problem, value, raw = await repair(
            turn, "plan", messages, schema, problem=problem, last=raw, parent=span
        )
        goal, steps, problem = _read_plan(turn, value, problem, taken)
        if problem:
            if span is not None:
                span.fail("invalid_plan", problem)
            raise TurnFailedError(
                "invalid_plan", f"no usable {what} after one repair round: {problem}"
            )
        return goal, _planned(span, goal, _reads_kept(turn, steps, what, taken)), True
    finally:
        if span is not None:
            span.end()


def _planned(span: PlanSpan | None, goal: str, steps: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
    """*steps*, said on the plan span (goal and size)."""
    if span is not None:
        span.planned(goal, len(steps))
    return steps


def _reads_kept(
    turn: Turn, steps: tuple[PlanStep, ...], what: str, taken: frozenset[str] | None
) -> tuple[PlanStep, ...]:
    """*steps* without the side-effecting ones when the request asks for nothing to change
    (:mod:`agentkit.planning.reads`); a whole plan left with no answer step gets one."""
    kept = reads.keep_reads(turn, steps, what)
    if kept == steps or taken is not None or any(s.type == "respond" for s in kept):
        return kept
    answer = PlanStep(
        id="answer_reads" if all(s.id != "answer_reads" for s in kept) else "answer_reads_2",
        type="respond",
        title="Answer",
        instruction="Answer the request from the observations; nothing is to be changed.",
    )
    return (*kept, answer)


def _read_plan(
    turn: Turn, value: JsonValue, problem: str, taken: frozenset[str] | None
) -> tuple[str, tuple[PlanStep, ...], str]:
    if problem:
        return "", (), problem
    try:
        goal, steps = parse_plan(
            value,
            turn.tools,
            turn.ctx.config.max_steps,
            taken=taken or frozenset(),
            batch=taken is not None,
        )
    except PlanFormatError as error:
        return "", (), error.problem
    return goal, steps, ""
