"""Compression: fold the older part of the chat window into TaskState (seed 002).

:func:`maybe_compress` does nothing unless the window holds more than ``max_messages``
messages *and* more than ``token_threshold`` estimated tokens. Then the older messages are
folded into TaskState by the configured strategy (``compression.strategy``,
:mod:`agentkit.memory.strategies`: the model's summary — purpose ``summarize``, structured
JSON —, extraction by rule, or both) and the window keeps its last ``keep_recent`` messages.
Every model-written fact is grounded against the window that was cut (the part summarised
and the part kept, :mod:`agentkit.memory.grounding`); an ungrounded one is dropped and
counted.

Invariants:

* the cut never separates an assistant message with tool calls from its ``tool`` results, and
  the kept window never starts with a tool result (:func:`~agentkit.memory.history.tool_safe_cut`);
* pinned facts survive whatever the model writes (it cannot edit them);
* the summary is validated (:class:`~agentkit.memory.task_state.TaskStateSummary`) and
  normalised before it is used;
* on a model failure nothing changes (``model``; ``hybrid`` keeps its extractive part and
  says so in ``warning``): the outcome carries the old window and state and the error, and
  nothing is raised. Persisting the new state is the caller's job.

Traced when the caller passes a ``parent`` span (the turn's, :mod:`agentkit.telemetry`): an
attempt that calls the model is an ``update_memory task_state`` span under it (strategy
``archive`` for compression, ``update`` for the incremental update; the compression's figures
as ``agentkit.compression.*``; ``error.type`` on a model failure), with the summarise call
as its ``chat {model}`` child. The call itself is the caller's (``summarize``, made through
its :class:`~agentkit.calls.tracer.CallTracer`): this module calls no model.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import TYPE_CHECKING

from pydantic import ValidationError

from agentkit.config import CompressionConfig, CompressionStrategy
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.events import CompressionEvent
from agentkit.memory.history import tool_safe_cut
from agentkit.memory.strategies import Folded, fold
from agentkit.memory.task_state import TaskState, TaskStateSummary, summary_schema
from agentkit.memory.tokens import (
    TokenEstimator,
    estimate_messages,
    estimator_for,
    message_text,
)
from agentkit.models.base import ChatMessage, ChatModel, Completion, JsonSchema
from agentkit.types import Message

if TYPE_CHECKING:
    from agentkit.telemetry import Span

#: how a caller makes the summarise call itself: ``(messages, schema, span) -> Completion``
#: with ``structured`` set (a planner turn passes its call tracer's, which records it)
Summarize = Callable[[list[ChatMessage], JsonSchema, "Span | None"], Awaitable[Completion]]

__all__ = [
    "CompressionOutcome",
    "build_summarize_messages",
    "maybe_compress",
    "should_compress",
    "update_memory",
    "update_task_state",
]

#: a tool result longer than this is cut in the transcript the summariser reads
TRANSCRIPT_TOOL_RESULT_CHARS = 1000
_USER_MARKER = "<!-- user -->"
_SPEAKERS = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}


@dataclass(frozen=True, slots=True)
class CompressionOutcome:
    """What a compression attempt produced.

    On success ``task_state`` is the merged state, ``window`` the kept messages and ``event``
    the figures. On failure ``error`` is set, ``event`` is None and ``task_state``/``window``
    are the ones passed in, unchanged.
    """

    task_state: TaskState
    window: tuple[Message, ...]
    event: CompressionEvent | None
    error: ModelError | None = None
    strategy: CompressionStrategy = "model"
    #: the model-written facts grounding dropped (not found in the summarised messages)
    ungrounded: tuple[str, ...] = ()
    #: the model failed but the strategy still wrote a state (hybrid: its extractive part)
    warning: str = ""

    @property
    def compressed(self) -> bool:
        return self.error is None


@cache
def _template() -> tuple[Template, Template]:
    text = resources.files("agentkit.memory").joinpath("prompts/summarize.md").read_text("utf-8")
    system, _, user = text.partition(_USER_MARKER)
    return Template(system.strip()), Template(user.strip())


def _transcript(messages: list[Message]) -> str:
    lines: list[str] = []
    for message in messages:
        text = message_text(message) if message.role == "assistant" else message.content
        if message.role == "tool" and len(text) > TRANSCRIPT_TOOL_RESULT_CHARS:
            text = text[:TRANSCRIPT_TOOL_RESULT_CHARS] + "..."
        lines.append(f"{_SPEAKERS[message.role]}: {text}")
    return "\n".join(lines)


_SOURCES = {
    "archive": (
        "the archived dialogue below, which is about to be removed from the assistant's "
        "short-term memory",
        "Archived dialogue",
    ),
    "update": (
        "the latest conversation window below; capture newly confirmed facts now, keep "
        "still-relevant ones and replace contradicted ones",
        "Latest conversation window",
    ),
}


def build_summarize_messages(
    older: list[Message], task_state: TaskState, *, mode: str = "archive"
) -> list[ChatMessage]:
    """The ``summarize`` request: the rules (system) and the state plus the dialogue —
    ``archive`` (compression: the older part that leaves the window) or ``update`` (the
    incremental update after a turn: the latest messages, which stay)."""
    source, title = _SOURCES[mode]
    system, user = _template()
    pinned = "\n".join(f"- {fact}" for fact in task_state.pinned_facts) or "(none)"
    content = user.substitute(
        task_state=json.dumps(task_state.summary_view(), ensure_ascii=False, indent=2),
        pinned_facts=pinned,
        transcript_title=title,
        transcript=_transcript(older),
    )
    return [
        ChatMessage(role="system", content=system.substitute(source=source)),
        ChatMessage(role="user", content=content),
    ]


async def _summarize(
    messages: list[Message],
    task_state: TaskState,
    model: ChatModel,
    mode: str,
    *,
    memory: Span | None,
    summarize: Summarize,
) -> TaskStateSummary | ModelError:
    """The model's validated summary, or its failure (nothing raised); *memory*: the
    ``update_memory`` span the summarise call is traced under. *summarize*: the caller's way
    of making the call, through its call tracer (``agentkit.planning.upkeep.summarizer``),
    which times and traces it: no model call is made here."""
    sent = build_summarize_messages(messages, task_state, mode=mode)
    try:
        completion = await summarize(sent, summary_schema(), memory)
        return TaskStateSummary.model_validate(completion.structured)
    except ValidationError as error:
        problem = error.errors()[0]
        where = "/".join(str(part) for part in problem["loc"]) or "(root)"
        failure: ModelError = StructuredOutputError(
            model.spec or type(model).__name__, f"{where}: {problem['msg']}", repr(error)
        )
        _failed(failure, memory)
        return failure
    except ModelError as error:
        _failed(error, memory)
        return error


async def _fold(
    messages: list[Message],
    task_state: TaskState,
    model: ChatModel,
    *,
    config: CompressionConfig,
    estimate: TokenEstimator,
    mode: str,
    memory: Span | None,
    summarize: Summarize,
    scrub: Callable[[str], str] | None,
    ground_in: list[Message] | None = None,
) -> Folded:
    async def ask(sent: object, state: TaskState) -> TaskStateSummary | ModelError:
        return await _summarize(messages, state, model, mode, memory=memory, summarize=summarize)

    folded = await fold(
        config.strategy,
        messages,
        task_state,
        config=config,
        estimate=estimate,
        ask=ask,
        scrub=scrub,
        ground_in=ground_in,
    )
    if memory is not None:
        memory.set_many({
            "agentkit.compression.strategy": folded.strategy,
            "agentkit.compression.facts_ungrounded": folded.facts_ungrounded,
        })  # fmt: skip
    return folded


def _memory_span(parent: Span | None, strategy: str) -> Span | None:
    if parent is None:
        return None
    return parent.trace.memory_update(parent, store="task_state", strategy=strategy)


def _failed(error: ModelError, *spans: Span | None) -> None:
    for span in spans:
        if span is not None:
            span.fail(type(error).__name__, str(error))


async def update_memory(
    window: list[Message],
    task_state: TaskState,
    model: ChatModel,
    last: int,
    *,
    config: CompressionConfig | None = None,
    estimate: TokenEstimator | None = None,
    parent: Span | None = None,
    summarize: Summarize,
    scrub: Callable[[str], str] | None = None,
) -> Folded:
    """The incremental update: fold the last *last* messages of the window into TaskState
    with ``config.strategy`` without removing them (the window is unchanged). A model failure
    is in the result (``error``), never raised. *parent*: the span the ``update_memory``
    span goes under (None: not traced)."""
    config = config or CompressionConfig()
    recent = [m for m in window if m.role in ("user", "assistant")][-last:]
    if len(recent) < 2:
        return Folded(task_state, config.strategy)
    memory = _memory_span(parent, "update")
    try:
        if memory is not None:
            memory.set("agentkit.memory.messages", len(recent))
        return await _fold(
            recent, task_state, model, config=config, estimate=estimate or estimator_for(model),
            mode="update", memory=memory, summarize=summarize, scrub=scrub,
        )  # fmt: skip
    finally:
        if memory is not None:
            memory.end()


async def update_task_state(
    window: list[Message],
    task_state: TaskState,
    model: ChatModel,
    last: int,
    *,
    parent: Span | None = None,
    summarize: Summarize,
) -> TaskState | ModelError:
    """The seed's incremental update (strategy ``model``, :func:`update_memory`): the new
    state, or the model's failure, in which case the caller keeps the old state."""
    folded = await update_memory(
        window, task_state, model, last, parent=parent, summarize=summarize
    )
    return folded.error if folded.error is not None else folded.task_state


def should_compress(
    window: list[Message], config: CompressionConfig, estimate: TokenEstimator
) -> bool:
    """Over both thresholds: more than N messages and more than T estimated tokens."""
    if len(window) <= config.max_messages:
        return False
    return estimate_messages(window, estimate) > config.token_threshold


def _fact_changes(before: TaskState, after: TaskState) -> tuple[int, int]:
    old = {fact.casefold() for fact in before.important_facts}
    new = {fact.casefold() for fact in after.important_facts}
    return len(new - old), len(old - new)


async def maybe_compress(
    window: list[Message],
    task_state: TaskState,
    model: ChatModel,
    config: CompressionConfig,
    estimate: TokenEstimator,
    *,
    parent: Span | None = None,
    summarize: Summarize,
    scrub: Callable[[str], str] | None = None,
) -> CompressionOutcome | None:
    """Compress *window* into *task_state* when it is over both thresholds, else None.
    *parent*: the span an attempt's ``update_memory`` span goes under (None: not traced);
    *scrub*: removes the secret values the caller knows from extracted facts."""
    try:
        if not should_compress(window, config, estimate):
            return None
    except ModelError as error:  # the model's own tokenizer failed (e.g. weights missing)
        return CompressionOutcome(task_state, tuple(window), None, error)
    cut = tool_safe_cut(window, len(window) - config.keep_recent)
    older, kept = window[:cut], window[cut:]
    if not older:
        return None
    memory = _memory_span(parent, "archive")
    try:
        folded = await _fold(
            older, task_state, model, config=config, estimate=estimate, mode="archive",
            memory=memory, summarize=summarize, scrub=scrub, ground_in=window,
        )  # fmt: skip
        if folded.error is not None:
            return CompressionOutcome(
                task_state, tuple(window), None, folded.error, strategy=folded.strategy
            )
        new_state = folded.task_state
        added, removed = _fact_changes(task_state, new_state)
        event = CompressionEvent(
            messages_before=len(window),
            messages_after=len(kept),
            tokens_before=estimate_messages(window, estimate),
            tokens_after=estimate_messages(kept, estimate),
            facts_added=added,
            facts_removed=removed,
            strategy=folded.strategy,
            facts_ungrounded=folded.facts_ungrounded,
        )
        if memory is not None:
            memory.set_many({
                "agentkit.compression.messages_before": event.messages_before,
                "agentkit.compression.messages_after": event.messages_after,
                "agentkit.compression.tokens_before": event.tokens_before,
                "agentkit.compression.tokens_after": event.tokens_after,
                "agentkit.compression.facts_added": added,
                "agentkit.compression.facts_removed": removed,
            })  # fmt: skip
        return CompressionOutcome(
            new_state, tuple(kept), event, strategy=folded.strategy,
            ungrounded=folded.ungrounded, warning=folded.warning,
        )  # fmt: skip
    finally:
        if memory is not None:
            memory.end()
