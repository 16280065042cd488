"""Background memory upkeep: one job per conversation, admitted like a turn.

A turn an Agent runs yields ``result`` once its answer is durable and hands its memory upkeep
(TaskState update, compression: :mod:`agentkit.planning.upkeep`) to a background job. The job
is admitted to the conversation through the runtime's one admission (the registry of running
turns and the store's writer lock, so nothing else writes meanwhile) as soon as the turn that
queued it lets go; its outcome is a ``compression`` event returned to whoever waits for it
(:meth:`BackgroundUpkeep.wait`) and passed to the listeners. The next turn of that
conversation in this process waits for the job, at most ``compression.wait_seconds``; past
that the job is cancelled — nothing of it is written. ``Agent.aclose`` waits for the jobs and
cancels what is left after the same bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from agentkit.errors import ConversationBusyError
from agentkit.events import CompressionEvent
from agentkit.sessions.turns import RunningTurn
from agentkit.store import ConversationKey

__all__ = ["ADMIT_SECONDS", "Admit", "BackgroundUpkeep", "Listener"]

log = logging.getLogger("agentkit.planning")

#: how long a background job waits to be admitted after the turn that queued it (another
#: process's turn may take the conversation first); past it the upkeep is skipped
ADMIT_SECONDS = 30.0

#: the conversation's admission for a job (the runtime's, waiting up to ADMIT_SECONDS)
Admit = Callable[[], AbstractAsyncContextManager[RunningTurn]]
Listener = Callable[[ConversationKey, CompressionEvent], None]


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
        try:
            async with admit() as running:  # as soon as the turn that queued this lets go
                task = asyncio.current_task()

                def stop() -> None:  # Agent.cancel stops it, writing nothing
                    if task is not None:
                        task.cancel()

                await running.on_cancel(stop)
                event = await work()
        except ConversationBusyError:
            log.warning("memory upkeep of %s skipped: the conversation stayed busy", key)
            return None
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
