"""Many runs at once on one event loop (``--concurrency N``).

A run spends most of its time waiting for its model; against a remote endpoint one process can
keep N runs going, each in a data root of its own (:mod:`agentkit.eval.point`), their
``openai:`` models sharing one connection pool per endpoint (:mod:`agentkit.eval.pools`).
:func:`run_concurrently` starts a run whenever fewer than N are going and the caller has a next
task (the sweep's budget decides, :mod:`agentkit.eval.executors`); :func:`run_batch` is the
same for a fixed list, which is what a worker process or a Dask task runs, so ``--workers W
--concurrency N`` keeps W x N runs going.

Stopping (Ctrl-C, a cancelled task) cancels the runs that are going: each one's turn is
interrupted, its span ended and its data root removed; the rows already made are the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from agentkit.eval.point import export_from_worker, in_worker, run_point, run_point_async, run_sync
from agentkit.eval.row import RunRow
from agentkit.eval.task import PointTask

__all__ = ["run_batch", "run_concurrently"]


async def run_concurrently(
    next_task: Callable[[], PointTask | None],
    on_row: Callable[[PointTask, RunRow], object],
    *,
    concurrency: int,
    on_start: Callable[[PointTask], object] | None = None,
) -> None:
    """Run tasks from *next_task* (None: no more to start now) with up to *concurrency* going;
    *on_row* gets each row as its run ends, in the order they end."""
    from agentkit.eval.pools import EndpointPools

    running: dict[asyncio.Task[RunRow], PointTask] = {}
    async with EndpointPools(concurrency) as pools:
        try:
            while True:
                while len(running) < concurrency:
                    task = next_task()
                    if task is None:
                        break
                    if on_start is not None:
                        on_start(task)
                    running[asyncio.create_task(run_point_async(task, pools))] = task
                if not running:
                    return
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for finished in sorted(done, key=lambda item: running[item].index):
                    on_row(running.pop(finished), finished.result())
        finally:
            for going in running:
                going.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)


def run_batch(tasks: Sequence[PointTask], concurrency: int) -> list[RunRow]:
    """Run *tasks* (a worker's share), *concurrency* at once; the rows in task order."""
    if concurrency <= 1 or len(tasks) <= 1:
        return [run_point(task) for task in tasks]
    worker = in_worker()
    if worker and any(task.traceparent is not None for task in tasks):
        export_from_worker()
    pending = list(reversed(tasks))
    rows: dict[int, RunRow] = {}

    def next_task() -> PointTask | None:
        return pending.pop() if pending else None

    def keep(task: PointTask, row: RunRow) -> None:
        rows[task.index] = row

    try:
        run_sync(run_concurrently(next_task, keep, concurrency=concurrency))
    finally:
        if worker:
            from agentkit.telemetry.setup import flush

            flush()
    return [rows[task.index] for task in tasks]
