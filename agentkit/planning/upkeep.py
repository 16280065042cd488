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

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from agentkit.errors import AgentkitError, ConversationBusyError
from agentkit.events import CompressionEvent
from agentkit.memory import chat_window, estimator_for, maybe_compress
from agentkit.memory.compression import CompressionOutcome, Summarize, update_memory
from agentkit.memory.history import kept_from
from agentkit.memory.task_state import TaskState
from agentkit.models.base import ChatMessage, ChatModel, Completion, JsonSchema, validate_structured
from agentkit.planning.state import TurnContext
from agentkit.planning.trace import CallRecord
from agentkit.planning.tracer import CallTracer, CancelScope
from agentkit.sessions.turns import RunningTurn
from agentkit.store import ConversationKey
from agentkit.store.records import CompressionRecord
from agentkit.telemetry import Span
from agentkit.types import Message, utc_now

__all__ = [
    "ADMIT_SECONDS",
    "Admit",
    "BackgroundUpkeep",
    "Prepared",
    "commit",
    "needed",
    "prepare",
    "queue",
    "upkeep",
]

log = logging.getLogger("agentkit.planning")

#: how long a background job waits to be admitted after the turn that queued it (another
#: process's turn may take the conversation first); past it the upkeep is skipped
ADMIT_SECONDS = 30.0
_PAUSE = 0.005


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


def _summarizer(calls: CallTracer, model: ChatModel) -> Summarize:
    async def summarize(
        messages: list[ChatMessage], schema: JsonSchema, span: Span | None
    ) -> Completion:
        async with calls.call("summarize", messages, schema, parent=span) as call:
            completion = await call.reply()
            value = validate_structured(model.spec, completion.text, schema)
            return completion.model_copy(update={"structured": value})

    return summarize


async def prepare(
    ctx: TurnContext, calls: CallTracer, turn_messages: Sequence[Message]
) -> Prepared:
    """The incremental update and the compression, computed (model calls through the turn's
    call tracer *calls*) but not written. *turn_messages*: what this turn added (the user's
    message and the answer)."""
    config, model = ctx.compression, ctx.model
    if config is None or not isinstance(model, ChatModel):
        return Prepared()
    conversation = [*ctx.history, *turn_messages]
    window = chat_window(conversation, ctx.history_start)
    start_state = task = ctx.task.value
    summarize = _summarizer(calls, model)
    parent = ctx.trace.root if ctx.trace is not None else None
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
                start=ctx.history_offset + kept_from(conversation, kept),
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


def commit(ctx: TurnContext, prepared: Prepared) -> CompressionEvent | None:
    """Write what :func:`prepare` computed (see the module docstring for the order); the
    ``compression`` event when the window was compressed."""
    key, store = ctx.key, ctx.store
    notes = list(prepared.notes)
    if prepared.task_state is not None:
        try:
            ctx.memory.save_task_state(
                key.agent_id, key.conversation_id, prepared.task_state,
                expected_version=ctx.task.version,
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
    ctx: TurnContext, calls: CallTracer, turn_messages: Sequence[Message]
) -> CompressionEvent | None:
    """:func:`prepare` then :func:`commit`, in the turn (a turn no Agent runs); the
    ``compression`` event if the window was compressed."""
    return commit(ctx, await prepare(ctx, calls, turn_messages))


Admit = Callable[[], AbstractAsyncContextManager[RunningTurn]]
Listener = Callable[[ConversationKey, CompressionEvent], None]


def needed(ctx: TurnContext, turn_messages: Sequence[Message]) -> bool:
    """Whether upkeep may have anything to do after this turn (an incremental update is
    configured, or the window is over the first threshold)."""
    config = ctx.compression
    if config is None or not isinstance(ctx.model, ChatModel):
        return False
    if config.incremental_messages:
        return True
    window = chat_window([*ctx.history, *turn_messages], ctx.history_start)
    return len(window[-(4 * ctx.max_turns + 2) :]) > config.max_messages


def queue(
    ctx: TurnContext,
    turn_messages: Sequence[Message],
    background: BackgroundUpkeep,
    admit: Admit,
    records: list[CallRecord],
) -> None:
    """Hand this turn's upkeep to *background* (nothing when it has nothing to do). Its
    ``summarize`` calls go to the turn's ``calls.jsonl`` (and *records*) and its spans to the
    turn's trace, under its root (which ended with ``result``: they end after it)."""
    if not needed(ctx, turn_messages):
        return
    assert ctx.compression is not None
    cancel = CancelScope()
    calls = CallTracer(
        model=ctx.model,
        message_id=ctx.message_id,
        timeout=ctx.timeout,
        scrub=ctx.scrub,
        cancel=cancel,
        sink=ctx.store.open_trace(ctx.key, ctx.message_id),
        trace=ctx.trace,
        records=records,
    )

    async def work() -> CompressionEvent | None:
        try:
            return commit(ctx, await prepare(ctx, calls, turn_messages))
        finally:
            calls.close()

    background.start(ctx.key, work, admit, wait_seconds=ctx.compression.wait_seconds)


@dataclass(eq=False)
class _Job:
    key: ConversationKey
    task: asyncio.Task[CompressionEvent | None]
    wait_seconds: float
    done: asyncio.Event = field(default_factory=asyncio.Event)
    reported: bool = False  # its failure was logged (once, whoever waits)


#: finished jobs remembered for a late :meth:`BackgroundUpkeep.wait` (per conversation)
_KEEP_FINISHED = 1024


class BackgroundUpkeep:
    """The background memory upkeep jobs of one agent runtime, one per conversation at a
    time (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: dict[ConversationKey, _Job] = {}
        #: each conversation's last finished job (what :meth:`wait` reports once it is done)
        self._last: dict[ConversationKey, _Job] = {}
        #: called with each ``compression`` event a job produces (whoever is listening)
        self.listeners: list[Listener] = []

    def __len__(self) -> int:
        return len(self._jobs)

    def pending(self, key: ConversationKey) -> bool:
        return key in self._jobs

    def start(
        self,
        key: ConversationKey,
        work: Callable[[], Awaitable[CompressionEvent | None]],
        admit: Admit,
        *,
        wait_seconds: float,
    ) -> None:
        """Run *work* once the conversation is admitted again (*admit*: as a turn is), in a
        task of the running loop. A job already queued for *key* is the caller's bug."""
        if key in self._jobs:
            raise RuntimeError(f"an upkeep job of {key} is still queued")
        task = asyncio.get_running_loop().create_task(
            self._run(key, work, admit), name=f"upkeep {key.agent_id}/{key.conversation_id}"
        )
        job = _Job(key, task, wait_seconds)
        self._jobs[key] = job
        self._last.pop(key, None)
        task.add_done_callback(lambda _task: self._finished(job))

    def _finished(self, job: _Job) -> None:
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]
            self._last[job.key] = job
            if len(self._last) > _KEEP_FINISHED:  # a long-running server: the oldest go
                del self._last[next(iter(self._last))]
        job.done.set()

    async def _run(
        self,
        key: ConversationKey,
        work: Callable[[], Awaitable[CompressionEvent | None]],
        admit: Admit,
    ) -> CompressionEvent | None:
        deadline = time.monotonic() + ADMIT_SECONDS
        while True:  # the turn that queued this lets go of the conversation right after result
            admitted = admit()
            try:
                running = await admitted.__aenter__()
            except ConversationBusyError:
                if time.monotonic() > deadline:
                    log.warning("memory upkeep of %s skipped: the conversation stayed busy", key)
                    return None
                await asyncio.sleep(_PAUSE)
                continue
            break
        try:
            task = asyncio.current_task()

            def stop() -> None:  # Agent.cancel stops it, writing nothing
                if task is not None:
                    task.cancel()

            await running.on_cancel(stop)
            event = await work()
        except BaseException as error:
            if not await admitted.__aexit__(type(error), error, error.__traceback__):
                raise
            return None
        await admitted.__aexit__(None, None, None)
        if event is not None:
            for listener in list(self.listeners):
                try:
                    listener(key, event)
                except Exception:  # a listener's bug never fails the upkeep
                    log.exception("a compression listener failed")
        return event

    async def wait(
        self, key: ConversationKey, timeout: float | None = None
    ) -> CompressionEvent | None:
        """Wait for *key*'s job (at most *timeout*, default the job's ``wait_seconds``); its
        ``compression`` event (also when it finished before), or None (no job, nothing
        compressed, failed). Past the bound the job is cancelled: nothing of it is written."""
        job = self._jobs.get(key) or self._last.get(key)
        if job is None:
            return None
        limit = job.wait_seconds if timeout is None else timeout
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                await job.done.wait()
        if not job.task.done():
            log.warning("memory upkeep of %s took longer than %g s: cancelled", key, limit)
            job.task.cancel()
            await job.done.wait()
        if job.task.cancelled():
            return None
        error = job.task.exception()
        if error is not None:
            if not job.reported:
                job.reported = True
                log.error("memory upkeep of %s failed: %s", key, error, exc_info=error)
            return None
        return job.task.result()

    async def close(self, timeout: float | None = None) -> int:
        """Wait for every job (each at most its bound, or *timeout*), cancelling what is
        left; how many had to be cancelled."""
        cancelled = 0
        for key in list(self._jobs):
            job = self._jobs.get(key)
            if job is None:
                continue
            await self.wait(key, timeout)
            cancelled += job.task.cancelled()
        return cancelled
