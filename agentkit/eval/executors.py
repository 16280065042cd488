"""Where runs execute: here (one after another, N at once, or in a pool of processes) or on a
Dask cluster.

Every executor takes the same picklable :class:`~agentkit.eval.task.PointTask` values, runs
each at most once, and returns the rows **in task order** whatever order they finished in, so
the results table does not depend on the executor. ``concurrency`` runs that many at once on
one event loop (:mod:`agentkit.eval.concurrency`); it composes with ``workers`` (each process
runs its share that many at once) and with Dask (each task is a batch run that many at once).

A task starts only while the sweep's token budget (:class:`~agentkit.eval.budget.SweepBudget`)
is not spent; the tasks that never start are rows with ``outcome`` ``not_started``. A progress
bar (tqdm, on stderr) advances as runs finish and shows how many are running, passed, failed
and over budget. Ctrl-C stops the sweep cleanly: the runs that are going are cancelled (in
worker processes too), and :class:`SweepInterrupted` carries every row — the finished runs,
and ``not_started`` rows for the rest — for the caller to save and ``--resume`` later.

Dask (``dask.distributed``) is imported only when asked for: ``dask://HOST:PORT`` (or
``tcp://HOST:PORT``) connects a client to that scheduler, and an existing
``distributed.Client`` may be passed in from Python. The workers need agentkit installed (the
same version); they need no shared disk, because each task carries the agent's files.
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.eval.budget import SweepBudget
from agentkit.eval.concurrency import run_batch, run_concurrently
from agentkit.eval.point import not_started_row, run_point, run_sync
from agentkit.eval.row import RunRow
from agentkit.eval.task import PointTask

__all__ = ["ExecutorSpec", "Progress", "SweepInterrupted", "describe_executor", "run_tasks"]

#: "local", "dask://HOST:PORT", "tcp://HOST:PORT", or a ``distributed.Client``
ExecutorSpec = Any
#: a worker's batch holds up to this many times --concurrency runs
_BATCH_WAVES = 4


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped (Ctrl-C). ``rows`` holds a row for every run: the finished ones
    and ``not_started`` rows for the others; ``results`` (set by ``run_eval``) is them as the
    results table, ready to save so that ``--resume`` runs the rest."""

    def __init__(self, rows: list[RunRow], finished: int) -> None:
        super().__init__(f"the sweep was stopped after {finished} of {len(rows)} runs")
        self.rows = rows
        self.finished = finished
        self.results: Any = None


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...
    def set_postfix_str(self, s: str = "", refresh: bool = True) -> object: ...
    def close(self) -> None: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, enabled: bool, label: str) -> Progress:
    if not enabled:
        return _Silent()
    from tqdm.auto import tqdm

    bar: Progress = tqdm(total=total, desc=label, unit="run", leave=True)
    return bar


class _Feed:
    """The tasks still to start, in order, while the sweep's budget lasts; the rows made, and
    the counts the progress bar shows."""

    def __init__(self, tasks: Sequence[PointTask], budget: SweepBudget, bar: Progress) -> None:
        self.pending = deque(tasks)
        self.budget = budget
        self.bar = bar
        self.rows: dict[int, RunRow] = {}
        self.running = self.passed = self.failed = self.over_budget = 0

    def next(self) -> PointTask | None:
        """The next task to start, or None (none left, or the sweep's budget is spent)."""
        if not self.pending or self.budget.is_spent:
            return None
        self.running += 1
        self._show()
        return self.pending.popleft()

    def take(self, size: int) -> list[PointTask]:
        """Up to *size* tasks to start together (a worker's batch)."""
        unit: list[PointTask] = []
        while len(unit) < size:
            task = self.next()
            if task is None:
                break
            unit.append(task)
        return unit

    def batch_size(self, concurrency: int, slots: int) -> int:
        """How many tasks one batch takes: a few times *concurrency* (inside a batch a run
        starts as soon as another ends, so the runs do not go in lockstep waves), less when
        few are left; one when the batch runs one at a time."""
        if concurrency == 1:
            return 1
        share = math.ceil(len(self.pending) / max(1, slots))
        return max(1, min(_BATCH_WAVES * concurrency, share))

    def done(self, task: PointTask, row: RunRow) -> object:
        self.rows[task.index] = row
        self.budget.record(row.tokens)
        self.running -= 1
        if row.outcome == "budget":
            self.over_budget += 1
        elif row.passed:
            self.passed += 1
        else:
            self.failed += 1
        self.bar.update(1)
        self._show()
        return None

    def _show(self) -> None:
        self.bar.set_postfix_str(
            f"running {self.running}, passed {self.passed}, failed {self.failed}, "
            f"over budget {self.over_budget}",
            refresh=False,
        )

    def all_rows(self, tasks: Sequence[PointTask], reason: str) -> list[RunRow]:
        """A row per task, in task order: the runs' own, else a ``not_started`` row."""
        return [self.rows.get(task.index) or not_started_row(task, reason) for task in tasks]


def _dask_address(spec: str) -> str | None:
    """The scheduler address in *spec*, or None when *spec* means the local executor."""
    text = spec.strip()
    if text in ("", "local"):
        return None
    for prefix, scheme in (("dask://", "tcp://"), ("tcp://", "tcp://"), ("tls://", "tls://")):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            host, _, port = rest.rpartition(":")
            if not host or not port.isdigit():
                raise UsageError(f"--executor {spec!r}: the scheduler address needs HOST:PORT")
            return scheme + rest
    raise UsageError(f"--executor must be 'local' or 'dask://HOST:PORT', got {spec!r}")


def describe_executor(executor: ExecutorSpec, workers: int, concurrency: int = 1) -> str:
    """A short label for the progress bar and the summary ("local, 2 workers", "dask tcp://…")."""
    at_once = f", {concurrency} at once" if concurrency > 1 else ""
    if executor is None or isinstance(executor, str):
        address = _dask_address(executor or "local")
        if address is None:
            return (f"local, {workers} workers" if workers > 1 else "local") + at_once
        return f"dask {address}{at_once}"
    return f"dask {getattr(getattr(executor, 'scheduler', None), 'address', 'client')}{at_once}"


def run_tasks(
    tasks: Sequence[PointTask],
    *,
    executor: ExecutorSpec = None,
    workers: int = 1,
    concurrency: int = 1,
    progress: bool = True,
    sweep_max_tokens: int | None = None,
) -> list[RunRow]:
    """Run the tasks (each at most once, while the sweep's budget lasts); a row per task, in
    task order. Ctrl-C raises :class:`SweepInterrupted` carrying the rows."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    if concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {concurrency}")
    budget = SweepBudget(sweep_max_tokens)
    label = describe_executor(executor, workers, concurrency)
    bar = _bar(len(tasks), progress, label)
    feed = _Feed(tasks, budget, bar)
    try:
        if executor is None or isinstance(executor, str):
            address = _dask_address(executor or "local")
            if address is None:
                _local(feed, workers, concurrency)
            else:
                with _client(address) as client:
                    _on_dask(client, feed, concurrency)
        else:
            _on_dask(executor, feed, concurrency)
    except KeyboardInterrupt:
        raise SweepInterrupted(feed.all_rows(tasks, "interrupted"), len(feed.rows)) from None
    finally:
        bar.close()
    return feed.all_rows(tasks, budget.reason())


def _local(feed: _Feed, workers: int, concurrency: int) -> None:
    if workers == 1 or len(feed.pending) <= 1:
        if concurrency == 1:
            while (task := feed.next()) is not None:
                feed.done(task, run_point(task))
        else:
            run_sync(run_concurrently(feed.next, feed.done, concurrency=concurrency))
        return
    # spawn, not fork: the parent may hold threads (an agent's loop, a notebook kernel)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_worker_signals
    ) as pool:
        inflight: dict[Future[list[RunRow]], list[PointTask]] = {}
        try:
            while True:
                while len(inflight) < 2 * workers:  # one queued behind each running batch
                    unit = feed.take(feed.batch_size(concurrency, workers))
                    if not unit:
                        break
                    inflight[pool.submit(run_batch, unit, concurrency)] = unit
                if not inflight:
                    return
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in done:
                    unit = inflight.pop(future)
                    for task, row in zip(unit, future.result(), strict=True):
                        feed.done(task, row)
        except BaseException:
            for future in inflight:
                future.cancel()
            _stop_workers(pool)
            raise


def _worker_signals() -> None:
    """A worker process leaves Ctrl-C to the parent, and a terminate ends its run cleanly (its
    data root is removed on the way out)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the pool's processes now (their running batches are abandoned)."""
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        if process.is_alive():
            process.terminate()


@contextmanager
def _client(address: str) -> Iterator[Any]:
    require("eval", "the Dask executor", "distributed")
    from distributed import Client

    try:
        client = Client(address, timeout="15s", set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as error:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    try:
        yield client
    finally:
        client.close()  # type: ignore[no-untyped-call]


def _on_dask(client: Any, feed: _Feed, concurrency: int) -> None:  # noqa: ANN401
    from distributed import as_completed as dask_completed

    threads = max(1, sum(client.nthreads().values()))
    inflight: dict[Any, list[PointTask]] = {}
    finished = dask_completed([], loop=client.loop)  # type: ignore[no-untyped-call]

    def fill() -> None:
        while len(inflight) < 2 * threads:  # one queued behind each running batch
            unit = feed.take(feed.batch_size(concurrency, threads))
            if not unit:
                return
            future = client.submit(run_batch, unit, concurrency, pure=False)
            inflight[future] = unit
            finished.add(future)  # type: ignore[no-untyped-call]

    try:
        fill()
        while inflight:
            future = next(finished)
            unit = inflight.pop(future)
            rows = future.result()
            future.release()
            for task, row in zip(unit, rows, strict=True):
                feed.done(task, row)
            fill()
    finally:
        for future in inflight:
            future.cancel()
