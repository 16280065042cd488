"""Where runs execute: here (one after another, or a pool of processes) or on a Dask cluster.

Every executor takes the same picklable :class:`~agentkit.eval.point.PointTask` values, runs
:func:`~agentkit.eval.point.run_point` on each exactly once, and returns the rows **in task
order** whatever order they finished in, so the results table does not depend on the executor.
A progress bar (tqdm, on stderr) advances as runs finish.

Dask (``dask.distributed``) is imported only when asked for: ``dask://HOST:PORT`` (or
``tcp://HOST:PORT``) connects a client to that scheduler, and an existing
``distributed.Client`` may be passed in from Python. The workers need agentkit installed (the
same version); they need no shared disk, because each task carries the agent's files.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, Protocol

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.eval.point import PointTask, run_point

__all__ = ["ExecutorSpec", "Progress", "describe_executor", "run_tasks"]

#: "local", "dask://HOST:PORT", "tcp://HOST:PORT", or a ``distributed.Client``
ExecutorSpec = Any
Row = dict[str, Any]


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...
    def close(self) -> None: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, enabled: bool, label: str) -> Progress:
    if not enabled:
        return _Silent()
    from tqdm.auto import tqdm

    bar: Progress = tqdm(total=total, desc=label, unit="run", leave=True)
    return bar


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


def describe_executor(executor: ExecutorSpec, workers: int) -> str:
    """A short label for the progress bar and the summary ("local, 2 workers", "dask tcp://…")."""
    if executor is None or isinstance(executor, str):
        address = _dask_address(executor or "local")
        if address is None:
            return f"local, {workers} workers" if workers > 1 else "local"
        return f"dask {address}"
    return f"dask {getattr(getattr(executor, 'scheduler', None), 'address', 'client')}"


def run_tasks(
    tasks: Sequence[PointTask],
    *,
    executor: ExecutorSpec = None,
    workers: int = 1,
    progress: bool = True,
) -> list[Row]:
    """Run every task once; the rows in task order."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    label = describe_executor(executor, workers)
    bar = _bar(len(tasks), progress, label)
    try:
        if executor is None or isinstance(executor, str):
            address = _dask_address(executor or "local")
            if address is None:
                return _local(tasks, workers, bar.update)
            with _client(address) as client:
                return _on_dask(client, tasks, bar.update)
        return _on_dask(executor, tasks, bar.update)
    finally:
        bar.close()


def _local(tasks: Sequence[PointTask], workers: int, done: Callable[[int], object]) -> list[Row]:
    rows: dict[int, Row] = {}
    if workers == 1 or len(tasks) <= 1:
        for task in tasks:
            rows[task.index] = run_point(task)
            done(1)
    else:
        # spawn, not fork: the parent may hold threads (an agent's loop, a notebook kernel)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(run_point, task): task.index for task in tasks}
            for future in as_completed(futures):
                rows[futures[future]] = future.result()
                done(1)
    return [rows[task.index] for task in tasks]


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


def _on_dask(client: Any, tasks: Sequence[PointTask], done: Callable[[int], object]) -> list[Row]:  # noqa: ANN401
    from distributed import as_completed as dask_completed

    futures = client.map(run_point, list(tasks), pure=False)
    index_of = {future.key: task.index for future, task in zip(futures, tasks, strict=True)}
    rows: dict[int, Row] = {}
    try:
        for future in dask_completed(futures, loop=client.loop):  # type: ignore[no-untyped-call]
            rows[index_of[future.key]] = future.result()
            done(1)
    finally:
        for future in futures:
            future.release()
    return [rows[task.index] for task in tasks]
