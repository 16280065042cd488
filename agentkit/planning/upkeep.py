"""Memory upkeep after a completed planner turn: TaskState updates and compression.

* With ``compression.incremental_messages`` > 0 the latest messages are folded into TaskState
  (the seed's incremental update; the window stays as it is).
* When the window is over seed 002's N messages *and* T tokens, its older part is folded
  into TaskState by ``compression.strategy``, the last K kept, and a typed
  :class:`~agentkit.store.records.CompressionRecord` in the conversation says where the chat
  window starts from then on.

Both read the conversation and TaskState the turn read at intake (plus its own two
messages), not the store again, and both run first (:func:`prepare`: model calls, no
writes); then :func:`commit` writes, in this order: TaskState once (the update and the
compression together, compare-and-swap on the version read at intake), the record, the
``[MEMORY]`` note. A crash before TaskState is written leaves everything as it was; a crash
between TaskState and the record leaves the new TaskState with the window not yet cut
(the facts are in both: nothing lost). Both are best effort: a failed summary, or a
concurrent edit of TaskState (theirs is kept), is noted in the turn log and the turn stays
completed.

Off the answer's path (:class:`BackgroundUpkeep`): a turn an Agent runs yields ``result``
once its answer is durable and hands its upkeep to a background job. The job is admitted to
the conversation like a turn (the session pool's registry of running turns, and the store's
writer lock, so nothing else writes meanwhile) as soon as the turn that queued it lets go;
its outcome is the record, the ``[MEMORY]`` note and a ``compression`` event returned to
whoever waits for it (:meth:`BackgroundUpkeep.wait`) and passed to the registry's listeners.
The next turn of that conversation in this process waits for the job, at most
``compression.wait_seconds``; past that the job is cancelled — nothing of it is written,
TaskState stays as it was and the window, still over its thresholds, is compressed after
that turn instead. Another process's turn meanwhile gets ``ConversationBusyError``, as it
does for any turn in progress. ``Agent.aclose`` waits for the jobs and cancels what is left
after the same bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentkit.calls.cancel import CancelScope
from agentkit.calls.tracer import CallTracer
from agentkit.errors import AgentkitError
from agentkit.events import CompressionEvent
from agentkit.memory import chat_window, estimator_for, maybe_compress
from agentkit.memory.compression import CompressionOutcome, Summarize, update_memory
from agentkit.memory.history import kept_from
from agentkit.memory.task_state import TaskState
from agentkit.models.base import ChatMessage, ChatModel, Completion, JsonSchema, validate_structured
from agentkit.planning.state import Intake, TurnContext
from agentkit.store import off_loop
from agentkit.store.records import CompressionRecord
from agentkit.telemetry import Span, TurnTrace
from agentkit.types import Message, utc_now

__all__ = [
    "Prepared",
    "commit",
    "needed",
    "prepare",
    "queue",
    "summarizer",
    "upkeep",
]


@dataclass(frozen=True, slots=True)
class Prepared:
    """What upkeep would write: the new TaskState (None: unchanged), the compression's
    outcome and record, and the notes for the turn log."""

    task_state: TaskState | None = None
    outcome: CompressionOutcome | None = None
    record: CompressionRecord | None = None
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def writes(self) -> bool:
        return self.task_state is not None or self.record is not None or bool(self.notes)


def summarizer(tracer: CallTracer, model: ChatModel) -> Summarize:
    """The summarise call of compression made through *tracer* (its record and span), the
    reply validated against the summary's schema; a compression sweep uses it too."""

    async def summarize(
        messages: list[ChatMessage], schema: JsonSchema, span: Span | None
    ) -> Completion:
        async with tracer.call("summarize", messages, schema, parent=span) as call:
            completion = await call.reply()
            value = validate_structured(model.spec, completion.text, schema)
            return completion.model_copy(update={"structured": value})

    return summarize


async def prepare(
    ctx: TurnContext, intake: Intake, tracer: CallTracer, turn_messages: Sequence[Message]
) -> Prepared:
    """The incremental update and the compression, computed (model calls through the turn's
    call tracer *tracer*) but not written. *turn_messages*: what this turn added (the user's
    message and the answer)."""
    config, model = ctx.compression, ctx.model
    if config is None or not isinstance(model, ChatModel):
        return Prepared()
    conversation = [*intake.history, *turn_messages]
    window = chat_window(conversation, intake.start)
    start_state = task = intake.task.value
    summarize = summarizer(tracer, model)
    parent = tracer.trace.root if tracer.trace is not None else None
    notes: list[tuple[str, str]] = []
    estimate = estimator_for(model)
    if config.incremental_messages:
        folded = await update_memory(
            window[-(config.incremental_messages + 4) :], task, model,
            config.incremental_messages, config=config, estimate=estimate, parent=parent,
            summarize=summarize, scrub=ctx.scrub,
        )  # fmt: skip
        if folded.error is not None:
            notes.append(("ERROR", f"task state update: {folded.error}"))
        elif folded.task_state != task:
            task = folded.task_state
            dropped = f"; {folded.facts_ungrounded} ungrounded facts dropped" * bool(
                folded.ungrounded
            )
            notes.append(("MEMORY", f"task state updated from the latest messages{dropped}"))
    recent = window[-(4 * ctx.max_turns + 2) :]
    outcome: CompressionOutcome | None = None
    record: CompressionRecord | None = None
    if len(recent) > config.max_messages:
        started = time.perf_counter()
        outcome = await maybe_compress(
            recent, task, model, config, estimate, parent=parent, summarize=summarize,
            scrub=ctx.scrub,
        )  # fmt: skip
        elapsed = round((time.perf_counter() - started) * 1000, 1)
        if outcome is not None and (not outcome.compressed or outcome.event is None):
            notes.append(("ERROR", f"compression: {outcome.error}"))
            outcome = None
        elif outcome is not None and outcome.event is not None:
            task = outcome.task_state
            event = outcome.event
            kept = len(outcome.window)
            record = CompressionRecord(
                message_id=ctx.message_id,
                at=utc_now(),
                start=intake.offset + kept_from(conversation, kept),
                summarised=event.messages_before - kept,
                kept=kept,
                strategy=outcome.strategy,
                facts_kept=len(task.important_facts),
                facts_ungrounded=event.facts_ungrounded,
                summary_ms=elapsed,
            )
            warning = f"; the model failed ({outcome.warning})" * bool(outcome.warning)
            notes.append((
                "MEMORY",
                f"compression ({outcome.strategy}): {record.summarised} messages summarised "
                f"into TaskState, the last {kept} kept; {record.facts_kept} facts, "
                f"{record.facts_ungrounded} ungrounded dropped, {elapsed:g} ms{warning}",
            ))  # fmt: skip
    return Prepared(task if task != start_state else None, outcome, record, tuple(notes))


def commit(ctx: TurnContext, intake: Intake, prepared: Prepared) -> CompressionEvent | None:
    """Write what :func:`prepare` computed (see the module docstring for the order); the
    ``compression`` event when the window was compressed."""
    key, store = ctx.key, ctx.store
    notes = list(prepared.notes)
    if prepared.task_state is not None:
        try:
            ctx.memory.save_task_state(
                key.agent_id, key.conversation_id, prepared.task_state,
                expected_version=intake.task.version,
            )  # fmt: skip
        except AgentkitError as error:  # a concurrent edit of TaskState: keep theirs
            for label, text in notes:
                if label == "ERROR":
                    ctx.note(label, text)
            ctx.note("ERROR", f"memory upkeep: {error}")
            return None
    if prepared.record is not None:
        store.add_record(key, prepared.record)
    for label, text in notes:
        ctx.note(label, text)
    outcome = prepared.outcome
    return outcome.event if outcome is not None and prepared.record is not None else None


async def upkeep(
    ctx: TurnContext, intake: Intake, tracer: CallTracer, turn_messages: Sequence[Message]
) -> CompressionEvent | None:
    """:func:`prepare` then :func:`commit`, in the turn (a turn no Agent runs; its calls
    count in the turn's usage); the ``compression`` event if the window was compressed."""
    prepared = await prepare(ctx, intake, tracer, turn_messages)
    return await off_loop(commit, ctx, intake, prepared)  # durable writes (off_loop decides where)


def needed(ctx: TurnContext, intake: Intake, turn_messages: Sequence[Message]) -> bool:
    """Whether upkeep may have anything to do after this turn (an incremental update is
    configured, or the window is over the first threshold)."""
    config = ctx.compression
    if config is None or not isinstance(ctx.model, ChatModel):
        return False
    if config.incremental_messages:
        return True
    window = chat_window([*intake.history, *turn_messages], intake.start)
    return len(window[-(4 * ctx.max_turns + 2) :]) > config.max_messages


def queue(
    ctx: TurnContext,
    intake: Intake,
    trace: TurnTrace | None,
    turn_messages: Sequence[Message],
) -> bool:
    """Hand this turn's upkeep to the runtime's background jobs (False: nothing to do, or no
    background to run it in). Its ``summarize`` calls go to the turn's call records and its
    spans to the turn's trace, under its root (which ended with ``result``: they end after
    it); their usage comes with the ``compression`` event."""
    background, admit = ctx.upkeep, ctx.admit_upkeep
    if background is None or admit is None:
        return False
    if not needed(ctx, intake, turn_messages):
        return True
    assert ctx.compression is not None
    tracer = CallTracer.of(ctx, trace, cancel=CancelScope())

    async def work() -> CompressionEvent | None:
        try:
            prepared = await prepare(ctx, intake, tracer, turn_messages)
            event = await off_loop(commit, ctx, intake, prepared)  # off_loop decides where
        finally:
            tracer.close()
        return None if event is None else replace(event, usage=tracer.usage)

    background.start(ctx.key, work, admit, wait_seconds=ctx.compression.wait_seconds)
    return True
