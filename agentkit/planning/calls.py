"""Model calls of a planner turn: timed, interruptible, traced, and read once.

Every call runs under its stage's timeout (``STAGE_TIMEOUTS`` times ``stage_timeout_scale``), as a
task of its own so that a cancel interrupts it, and is traced: one :class:`CallRecord` per
call in :attr:`TurnState.calls` and the turn's ``calls.jsonl``, with its latency and tokens
even when it failed or timed out.

A structured reply is read in one place and once: the backend is given the JSON schema (a
grammar for the embedded model, ``response_format`` for an OpenAI endpoint), and the reply's
text is then extracted leniently (:func:`extract_json`) and validated by the pydantic reply
types of :mod:`agentkit.planning.plan`; a model failure or an unusable reply is a *problem*
string for the repair round, never an exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from pydantic import JsonValue

from agentkit.errors import ModelError, StructuredOutputError
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage, ChatModel, Completion, JsonSchema, Purpose
from agentkit.planning.plan import PlanFormatError, extract_json, parse_plan
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import batch_schema, plan_schema
from agentkit.planning.state import TurnCancelledError, TurnFailedError, TurnState
from agentkit.planning.trace import CallRecord, append_call_record
from agentkit.tools import mask_secrets

__all__ = [
    "call",
    "chat_model",
    "error_text",
    "interruptible",
    "read_reply",
    "record",
    "repair",
    "request_plan",
    "structured",
    "timeout",
]

T = TypeVar("T")
#: how much of an unusable reply the repair round shows the model again
_REPAIR_REPLY_CHARS = 4000


def chat_model(turn: TurnState) -> ChatModel:
    """The turn's model; the planner needs a stateless chat model."""
    model = turn.deps.model
    if not isinstance(model, ChatModel):
        raise TurnFailedError(
            "unsupported_model", f"the planner needs a chat model, not {model.spec!r}"
        )
    return model


def timeout(turn: TurnState, purpose: Purpose) -> float:
    return turn.deps.stage_timeouts.get(purpose, 36.0) * turn.deps.config.stage_timeout_scale


def record(turn: TurnState, call_record: CallRecord) -> None:
    """Trace one call: in memory, and in ``calls.jsonl`` when the store keeps files."""
    turn.calls.append(call_record)
    if turn.deps.traces is not None:
        append_call_record(turn.deps.traces, turn.message_id, call_record)


def error_text(error: BaseException) -> str:
    return str(error) or ("timed out" if isinstance(error, TimeoutError) else type(error).__name__)


async def interruptible(turn: TurnState, call_awaitable: Awaitable[T]) -> T:
    """Await a model call so that a cancel can interrupt it (as a task of its own; a
    cancellation of the whole turn from outside still propagates as CancelledError)."""
    turn.check_cancel()
    task = asyncio.ensure_future(call_awaitable)
    turn.inflight = task
    try:
        return await task
    except asyncio.CancelledError:
        if turn.cancel_requested and task.cancelled():
            raise TurnCancelledError("cancelled by the user") from None
        raise
    finally:
        turn.inflight = None


async def read_reply(
    model: ChatModel, messages: Sequence[ChatMessage], purpose: Purpose, schema: JsonSchema | None
) -> Completion:
    """The whole reply, its text not yet validated: the caller reads it once, against the
    reply type (see the module docstring); *schema* is what the backend is asked to follow."""
    final: Completion | None = None
    async for event in model.stream(messages, purpose=purpose, schema=schema):
        if isinstance(event, Completion):
            final = event
    if final is None:
        raise ModelError(model.spec or type(model).__name__, "the stream ended without a result")
    return final


async def call(
    turn: TurnState,
    purpose: Purpose,
    messages: list[ChatMessage],
    schema: JsonSchema | None,
    *,
    traced: bool = True,
) -> Completion:
    """One model call under its stage timeout. With *traced* the reply is traced as text;
    otherwise the caller traces :attr:`TurnState.pending_record` once it has read it."""
    model = chat_model(turn)
    started = time.perf_counter()
    # built from our own values (not validated again: the schema stays the agent's object,
    # whose JSON the trace writes once, see CallRecord.to_json_line)
    turn.pending_record = CallRecord.model_construct(
        purpose=purpose, messages=[m.model_dump() for m in messages], schema_=schema
    )
    try:
        async with asyncio.timeout(timeout(turn, purpose)):
            completion = await interruptible(turn, read_reply(model, messages, purpose, schema))
    finally:
        latency = round((time.perf_counter() - started) * 1000, 3)
        turn.pending_record = turn.pending_record.model_copy(update={"latency_ms": latency})
    turn.add_usage(completion.usage)
    turn.pending_record = turn.pending_record.model_copy(update={
        "input_tokens": completion.usage.input_tokens,
        "output_tokens": completion.usage.output_tokens,
    })  # fmt: skip
    if traced:
        text = turn.scrub(completion.text)
        record(turn, turn.pending_record.model_copy(update={"raw": text, "parsed": text}))
    return completion


async def structured(
    turn: TurnState, purpose: Purpose, messages: list[ChatMessage], schema: JsonSchema
) -> tuple[str, JsonValue]:
    """``(problem, value)``: the reply's JSON value (leniently extracted, not yet checked
    against the reply type) or the problem with it. Model failures are problems too."""
    try:
        raw = (await call(turn, purpose, messages, schema, traced=False)).text
    except StructuredOutputError as error:  # a backend that checks the schema itself
        raw = error.raw
    except (ModelError, TimeoutError, RecursionError) as error:
        problem = error_text(error)
        # the pending record carries the call's latency (a timeout took the whole stage)
        record(turn, turn.pending_record.model_copy(update={"error": problem}))
        return problem, None
    shown = turn.scrub(raw)
    try:
        value = extract_json(raw)
    except PlanFormatError as error:
        failed = {"raw": shown, "error": error.problem}
        record(turn, turn.pending_record.model_copy(update=failed))
        return error.problem, None
    read = {"raw": shown, "parsed": mask_secrets(value)}
    record(turn, turn.pending_record.model_copy(update=read))
    return "", value


async def repair(
    turn: TurnState,
    purpose: Purpose,
    messages: list[ChatMessage],
    problem: str,
    schema: JsonSchema,
) -> tuple[str, JsonValue]:
    """The repair round: the same call again, showing the model its last reply and *problem*."""
    last = turn.calls[-1].raw if turn.calls else ""
    prompt = render_prompt("repair", turn.deps.agent_dir, problem=problem)
    more = [
        *messages,
        ChatMessage(role="assistant", content=last[:_REPAIR_REPLY_CHARS]),
        ChatMessage(role="user", content=prompt),
    ]
    return await structured(turn, purpose, more, schema)


async def request_plan(
    turn: TurnState, messages: list[ChatMessage], what: str, taken: frozenset[str] | None = None
) -> tuple[str, tuple[PlanStep, ...], bool]:
    """A ``plan`` call, checked, with one repair round: ``(goal, steps, repaired)``. With
    *taken* (strategy next_step) it is the next batch: it may be empty, and its step ids
    must be new. No usable reply after the repair is a failed turn naming *what*."""
    tools, max_steps = turn.deps.tools, turn.deps.config.max_steps
    schema = plan_schema(tools, max_steps) if taken is None else batch_schema(tools, max_steps)
    problem, value = await structured(turn, "plan", messages, schema)
    goal, steps, problem = _read_plan(turn, value, problem, taken)
    if not problem:
        return goal, steps, False
    problem, value = await repair(turn, "plan", messages, problem, schema)
    goal, steps, problem = _read_plan(turn, value, problem, taken)
    if problem:
        raise TurnFailedError("invalid_plan", f"no usable {what} after one repair round: {problem}")
    return goal, steps, True


def _read_plan(
    turn: TurnState, value: JsonValue, problem: str, taken: frozenset[str] | None
) -> tuple[str, tuple[PlanStep, ...], str]:
    if problem:
        return "", (), problem
    try:
        goal, steps = parse_plan(
            value,
            turn.deps.tools,
            turn.deps.config.max_steps,
            taken=taken or frozenset(),
            batch=taken is not None,
        )
    except PlanFormatError as error:
        return "", (), error.problem
    return goal, steps, ""
